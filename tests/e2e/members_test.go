package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// topicEvents reads a topic's events in the topic's order (subscribe's:
// versions in order, then commit order), with a checkpoint kept in memory.
func topicEvents(t testing.TB, store storage.Store, topic string) []subscribe.Event {
	t.Helper()
	return topicEventsFrom(t, store, topic, 0)
}

// topicEventsFrom reads a topic's events from a version on.
func topicEventsFrom(t testing.TB, store storage.Store, topic string, from int64) []subscribe.Event {
	t.Helper()
	var out []subscribe.Event
	err := subscribe.Subscribe(context.Background(), store, topic, "truth", func(_ context.Context, b *subscribe.Batch) error {
		out = append(out, b.Events...)
		return nil
	}, subscribe.Options{Checkpoints: &memCheckpoints{}, Start: subscribe.FromVersion(from)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// memCheckpoints keeps one checkpoint in memory.
type memCheckpoints struct{ cp *subscribe.Checkpoint }

func (m *memCheckpoints) Load(context.Context, string, string) (subscribe.Checkpoint, bool, error) {
	if m.cp == nil {
		return subscribe.Checkpoint{}, false, nil
	}
	return *m.cp, true, nil
}

func (m *memCheckpoints) Commit(ctx context.Context, _ *subscribe.Checkpoint, next subscribe.Checkpoint, apply func(context.Context, pgx.Tx) error) error {
	if apply != nil {
		if err := apply(ctx, nil); err != nil {
			return err
		}
	}
	m.cp = &next
	return nil
}

func (m *memCheckpoints) List(context.Context) ([]subscribe.Checkpoint, error) { return nil, nil }

// memberLine is what the example members print per handled event (with
// --trace).
type memberLine struct {
	Member     string `json:"member"`
	Delivery   int32  `json:"delivery"`
	EventID    string `json:"event_id"`
	Key        string `json:"key"`
	ReceivedNS any    `json:"received_ns"` // a number (Python) or a string (TypeScript)
	AckSentNS  any    `json:"ack_sent_ns"`
	Acked      bool   `json:"acked"`
	// Acking marks the line a member prints before it sends an
	// acknowledgement: the acknowledgement may land and the member die
	// (or its server) before the member hears so and prints the outcome.
	Acking bool `json:"acking"`
}

func nanos(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// exampleMembers builds what the member examples need: python3 runs
// consumer.py as it is; consumer.ts is compiled with the TypeScript
// compiler scripts/install-typescript.sh installs.
type exampleMembers struct {
	py, js string
}

func buildExampleMembers(t testing.TB) exampleMembers {
	t.Helper()
	dir, err := filepath.Abs("../../examples/members")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is required for the Python member example: %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required for the TypeScript member example (scripts/deps.sh installs it): %v", err)
	}
	if out, err := exec.Command("sh", "../../scripts/install-typescript.sh").CombinedOutput(); err != nil {
		t.Fatalf("install-typescript.sh: %v\n%s", err, out)
	}
	tsDir := os.Getenv("DELTABUS_TYPESCRIPT_DIR")
	if tsDir == "" {
		home, _ := os.UserHomeDir()
		tsDir = filepath.Join(home, ".cache", "deltabus", "typescript")
	}
	out := t.TempDir()
	tsc := exec.Command(filepath.Join(tsDir, "node_modules", ".bin", "tsc"), "--strict", "--target", "es2022", "--module", "nodenext",
		"--moduleResolution", "nodenext", "--typeRoots", filepath.Join(tsDir, "node_modules", "@types"), "--types", "node",
		"--outDir", out, filepath.Join(dir, "consumer.ts"))
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc consumer.ts: %v\n%s", err, b)
	}
	return exampleMembers{py: filepath.Join(dir, "consumer.py"), js: filepath.Join(out, "consumer.js")}
}

// start starts member name (Python or TypeScript) of group g in topic
// "orders" against the server at url.
func (e exampleMembers) start(t testing.TB, lang, url, name string) *relayProc {
	t.Helper()
	args := []string{"--url", url, "--group", "g", "--topic", "orders", "--member", name, "--max", "20",
		"--handle-ms", "10", "--visibility-ms", "2000", "--trace"}
	if lang == "python" {
		return startProc(t, "python3", nil, append([]string{e.py}, args...)...)
	}
	return startProc(t, "node", nil, append([]string{e.js}, args...)...)
}

// readMemberLines reads every JSON line the members printed.
func readMemberLines(t testing.TB, procs []*relayProc) []memberLine {
	t.Helper()
	var out []memberLine
	for _, p := range procs {
		f, err := os.Open(p.log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l memberLine
			if strings.HasPrefix(sc.Text(), "{") && json.Unmarshal(sc.Bytes(), &l) == nil && l.EventID != "" {
				out = append(out, l)
			}
		}
		f.Close()
	}
	return out
}

// TestMembersInPythonAndTypeScript: members of one group, in Python and
// TypeScript, share topic "orders" over HTTP through two `relay serve`
// processes while producers write and the relay streams; members are
// SIGKILLed and added, one server is SIGKILLed and started again. Every
// event is acknowledged, each key's events were handed out strictly after
// the previous one of the key was acknowledged (checked event by event
// against the topic's commit order), and events were handed out again only
// when no delivery of them had been acknowledged.
func TestMembersInPythonAndTypeScript(t *testing.T) {
	ex := buildExampleMembers(t)
	storeURL, store := localStore(t)
	db := setup(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}
	relay := startRelay(t, env, "--batch-max-delay", "20ms")
	waitSlotActive(t, db.DSN, "deltabus", relay)

	addrs := []string{freeAddr(t), freeAddr(t)}
	serveArgs := func(addr string) []string { return []string{"serve", "--addr", addr, "--log-level", "warn"} }
	servers := []*relayProc{startProc(t, buildRelay(t), env, serveArgs(addrs[0])...), startProc(t, buildRelay(t), env, serveArgs(addrs[1])...)}
	url := func(i int) string { return "http://" + addrs[i%2] }

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var prod pacedProducer
	produced := make(chan struct{})
	const total = 4000
	go func() { prod.run(ctx, t, db.DSN, 400, total); close(produced) }()

	var mu sync.Mutex
	var all, live []*relayProc
	add := func(i int) {
		lang := []string{"python", "typescript"}[i%2]
		p := ex.start(t, lang, url(i), fmt.Sprintf("%s-%d", lang, i))
		mu.Lock()
		all, live = append(all, p), append(live, p)
		mu.Unlock()
	}
	for i := range 4 {
		add(i)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	n := 4
	for step := 0; step < 8; step++ {
		time.Sleep(time.Duration(700+rng.IntN(600)) * time.Millisecond)
		mu.Lock()
		victim := rng.IntN(len(live))
		live[victim].kill()
		live = append(live[:victim], live[victim+1:]...)
		mu.Unlock()
		add(n)
		n++
		if step%3 == 0 {
			add(n) // the group grows too
			n++
		}
		if step == 4 {
			servers[1].kill()
			t.Logf("server 2 SIGKILLed after %d events written; started again", prod.written.Load())
			servers[1] = startProc(t, buildRelay(t), env, serveArgs(addrs[1])...)
		}
	}
	if prod.written.Load() == total {
		t.Error("the producers finished before the last kill: kills did not happen while they wrote")
	}
	<-produced
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	want := topicEvents(t, store, "orders")
	end := want[len(want)-1].Position
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var st members.Status
		getJSON(t, "http://"+addrs[0]+"/v1/groups/g/topics/orders", &st)
		mu.Lock()
		lines := readMemberLines(t, all)
		mu.Unlock()
		// The group's state says every event is acknowledged once its
		// position passed the last one; the members' lines must say by
		// which delivery.
		done := (st.Position.Version > end.Version || st.Position.Version == end.Version && st.Position.Offset > end.Offset) &&
			len(ackedDeliveries(lines)) >= len(want)
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes, %d of %d events acknowledged by the members' lines; the group's position is %v, the last event's %v",
				len(ackedDeliveries(lines)), len(want), st.Position, end)
		}
		for _, s := range servers {
			if done, err := s.exited(); done {
				t.Fatalf("a server exited: %v\n%s", err, s.tail())
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range live {
		_ = p.stop(10 * time.Second)
	}
	lines := readMemberLines(t, all)
	checkMemberOrder(t, want, lines)
	for _, s := range servers {
		if strings.Contains(s.output(), "level=ERROR") {
			t.Errorf("a server logged an error:\n%s", s.tail())
		}
	}
}

// ackInfo is the delivery of an event whose acknowledgement counted, and
// when it was sent.
type ackInfo struct {
	sent     int64
	delivery int32
}

// ackedDeliveries returns, per event, the delivery whose acknowledgement
// counted: the one a member printed as acknowledged or, when no member
// heard the outcome, the last delivery, whose acknowledgement was sent and
// whose outcome nobody printed. A delivery after it would mean it did not
// count; callers check the group's state says every event is
// acknowledged.
func ackedDeliveries(lines []memberLine) map[string]ackInfo {
	type key struct {
		id string
		d  int32
	}
	out := map[string]ackInfo{}
	last := map[string]int32{}
	outcome := map[key]bool{}
	sending := map[key]int64{}
	for _, l := range lines {
		k := key{l.EventID, l.Delivery}
		switch {
		case l.Acking:
			sending[k] = nanos(l.AckSentNS)
		case l.Acked:
			out[l.EventID] = ackInfo{sent: nanos(l.AckSentNS), delivery: l.Delivery}
			outcome[k] = true
		default:
			outcome[k] = true
		}
		last[l.EventID] = max(last[l.EventID], l.Delivery)
	}
	for id, d := range last {
		k := key{id, d}
		if _, ok := out[id]; ok || outcome[k] {
			continue
		}
		if sent, ok := sending[k]; ok {
			out[id] = ackInfo{sent: sent, delivery: d}
		}
	}
	return out
}

// checkMemberOrder checks the members' lines against the topic's events
// in commit order.
func checkMemberOrder(t *testing.T, want []subscribe.Event, lines []memberLine) {
	t.Helper()
	ackedBy := map[string]int32{}
	for _, l := range lines {
		if !l.Acked {
			continue
		}
		if d, ok := ackedBy[l.EventID]; ok {
			t.Fatalf("event %s was acknowledged twice (deliveries %d and %d): handed out again after an acknowledgement", l.EventID, d, l.Delivery)
		}
		ackedBy[l.EventID] = l.Delivery
	}
	acked := ackedDeliveries(lines)
	prevOfKey := map[string]string{} // event id -> the previous event of its key
	last := map[string]string{}
	inTopic := map[string]bool{}
	for _, e := range want {
		inTopic[e.ID] = true
		if p, ok := last[e.Key]; ok {
			prevOfKey[e.ID] = p
		}
		last[e.Key] = e.ID
		if _, ok := acked[e.ID]; !ok {
			t.Fatalf("event %s (key %s) was never acknowledged", e.ID, e.Key)
		}
	}
	redelivered, handled := 0, 0
	for _, l := range lines {
		if l.Acking {
			continue
		}
		handled++
		if !inTopic[l.EventID] {
			t.Fatalf("member %s handled event %s, which is not in the topic", l.Member, l.EventID)
		}
		a := acked[l.EventID]
		if l.Delivery > a.delivery {
			t.Fatalf("event %s: delivery %d to %s came after delivery %d was acknowledged", l.EventID, l.Delivery, l.Member, a.delivery)
		}
		if l.Delivery > 1 {
			redelivered++
		}
		if p, ok := prevOfKey[l.EventID]; ok {
			if pa := acked[p]; pa.sent > nanos(l.ReceivedNS) {
				t.Fatalf("key %s: event %s was handed to %s at %d, before the previous event of its key, %s, was acknowledged (ack sent at %d)",
					l.Key, l.EventID, l.Member, nanos(l.ReceivedNS), p, pa.sent)
			}
		}
	}
	t.Logf("%d events, %d lines handled, %d redeliveries, %d acknowledgements whose outcome no member heard: every event acknowledged once, each key in commit order",
		len(want), handled, redelivered, len(acked)-len(ackedBy))
}
