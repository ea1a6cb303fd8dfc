package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/statuspage"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// redriveOutput is what the tests read of `deadletter redrive --json`.
type redriveOutput struct {
	Run      catalog.RepublishRun `json:"run"`
	Outcomes []republish.Outcome  `json:"outcomes"`
}

func redrive(t testing.TB, env []string, args ...string) redriveOutput {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, append([]string{"deadletter", "redrive", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("deadletter redrive: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var out redriveOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("deadletter redrive --json: %v\n%s", err, stdout)
	}
	return out
}

// storedDeadLetters reads the _dead_letter table: id -> dead letter.
func storedDeadLetters(t testing.TB, store storage.Store) map[string]outbox.DeadLetter {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(store, outbox.DeadLetterTopic)
	out := map[string]outbox.DeadLetter{}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Files {
		if err := topic.ReadDeadLetters(ctx, st, a, func(d outbox.DeadLetter) error { out[d.ID] = d; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRedriveAfterContractFix: events whose version had no contract, and
// one that breaks its contract, reach _dead_letter. Once the missing
// version is registered, `relay deadletter redrive --topic orders` (beside
// the running relay) publishes the events now admitted into orders, each
// with its event id, source, commit_lsn and seq, in their commit order;
// the one that still fails stays, with its reason, and `deadletter list`
// says so. The run is recorded with its actor. A second redrive is a
// no-op: nothing published, the table's version unchanged.
func TestRedriveAfterContractFix(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("redrive_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", file("v1.json", placedV1))

	addr := freeAddr(t)
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--contracts-poll", "500ms", "--metrics-addr", addr, "--status-refresh", "100ms")
	waitSlotActive(t, db.DSN, slot, p)
	insert := func(version int, payload string) string {
		t.Helper()
		id := outbox.NewID()
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', 'orders', 'k', 'OrderPlaced', %d, '%s')`, id, version, payload))
		return id
	}
	valid := insert(1, `{"order_id": 1}`)
	var unregistered []string
	for i := range 5 {
		unregistered = append(unregistered, insert(2, fmt.Sprintf(`{"order_id": %d, "currency": "EUR"}`, 10+i)))
	}
	invalid := insert(1, `{"order_id": "two"}`)
	waitDrained(t, db.DSN, slot, time.Minute)
	if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, []string{valid}) {
		t.Fatalf("orders holds %v before the redrive, want only %s", got, valid)
	}
	dead := storedDeadLetters(t, store)
	for _, id := range append(slices.Clone(unregistered), invalid) {
		if _, ok := dead[id]; !ok {
			t.Fatalf("event %s is not in _dead_letter", id)
		}
	}
	out := cli(0, "deadletter", "list", "--topic", "orders")
	if !strings.Contains(out, "has no contract version 2") || strings.Count(out, "dead") < 6 {
		t.Fatalf("deadletter list:\n%s", out)
	}

	// Nothing is admitted yet: a redrive publishes nothing, and says why.
	none := redrive(t, env, "--topic", "orders", "--actor", "first-try")
	if none.Run.Republished != 0 || none.Run.Refused != 6 {
		t.Fatalf("a redrive before the fix: %+v", none.Run)
	}

	// The fix: version 2 registered.
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2.json", placedV2))
	res := redrive(t, env, "--topic", "orders", "--actor", "oncall")
	if res.Run.Republished != 5 || res.Run.Refused != 1 || res.Run.Actor != "oncall" || res.Run.State != "done" {
		t.Fatalf("redrive run: %+v", res.Run)
	}
	for _, o := range res.Outcomes {
		if o.ID == invalid && (o.Status != republish.Refused || !strings.Contains(o.Reason, `"/order_id"`)) {
			t.Fatalf("the invalid event's outcome: %+v", o)
		}
	}
	rows, err := verify.ReadTopic(context.Background(), store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{valid}, unregistered...)
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = r.ID
		if i == 0 {
			continue
		}
		d := dead[r.ID]
		if r.CommitLSN != d.CommitLSN || r.Seq != d.Seq || r.Source != d.Source || r.Source == "" {
			t.Fatalf("redriven event %s: commit_lsn %d seq %d source %q; its dead letter %d %d %q", r.ID, r.CommitLSN, r.Seq, r.Source, d.CommitLSN, d.Seq, d.Source)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("orders holds %v after the redrive, want %v (the redriven ones in commit order)", got, want)
	}
	out = cli(0, "deadletter", "list", "--topic", "orders")
	if strings.Count(out, "redriven") != 5 || !strings.Contains(out, "still failing") || !strings.Contains(out, `"/order_id"`) {
		t.Fatalf("deadletter list after the redrive:\n%s", out)
	}
	show := cli(0, "deadletter", "show", invalid)
	if !strings.Contains(show, `"redrives"`) || !strings.Contains(show, "oncall") {
		t.Fatalf("deadletter show %s:\n%s", invalid, show)
	}

	// A second redrive is a no-op, with or without the redriven ones.
	v := latestVersion(t, store, "orders")
	for _, args := range [][]string{{"--topic", "orders"}, {"--topic", "orders", "--again"}} {
		again := redrive(t, env, args...)
		if again.Run.Republished != 0 {
			t.Fatalf("redrive %v again published %d events", args, again.Run.Republished)
		}
		if slices.Contains(args, "--again") && again.Run.Present != 5 {
			t.Fatalf("redrive --again: %+v, want the 5 found present", again.Run)
		}
	}
	if got := latestVersion(t, store, "orders"); got != v {
		t.Fatalf("a second redrive moved orders from version %d to %d", v, got)
	}
	checkOnce(t, store, "orders", want)

	// Each run is recorded, newest first.
	runs, err := catalog.ListRepublishRuns(context.Background(), store, 0)
	if err != nil || len(runs) != 4 || runs[2].ID != res.Run.ID || runs[2].Actor != "oncall" {
		t.Fatalf("recorded runs %+v (%v)", runs, err)
	}
	// The operator's page and /api/status show the redrives.
	time.Sleep(200 * time.Millisecond)
	shown := pageRuns(t, addr)
	i := slices.IndexFunc(shown, func(r statuspage.Run) bool { return r.ID == res.Run.ID })
	if i < 0 || shown[i].Actor != "oncall" || shown[i].Republished != 5 || shown[i].Refused != 1 || shown[i].Kind != "redrive" {
		t.Fatalf("/api/status shows runs %+v, want run %s by oncall", shown, res.Run.ID)
	}
	if html := pageHTML(t, addr); !strings.Contains(html, `id="republished"`) || !strings.Contains(html, res.Run.ID) || !strings.Contains(html, "oncall") {
		t.Fatalf("the operator's page does not show redrive %s", res.Run.ID)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// pageRuns returns the redrives and repairs /api/status shows.
func pageRuns(t testing.TB, addr string) []statuspage.Run {
	t.Helper()
	var st struct {
		Republished []statuspage.Run `json:"republished"`
	}
	if err := json.Unmarshal([]byte(pageGet(t, "http://"+addr+"/api/status")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Republished
}

func pageHTML(t testing.TB, addr string) string { return pageGet(t, "http://"+addr+"/") }

func pageGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

// TestReplayedDeadLetterStaysDead: a row dead-lettered while the slot was
// held behind another topic's hold is read again when the hold lifts. Its
// contract was fixed meanwhile, so judged again it would pass and land in
// its topic beside its dead letter (and beside what a redrive publishes):
// the relay keeps it a dead letter, and the redrive brings it back once.
func TestReplayedDeadLetterStaysDead(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("replay_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", file("v1.json", placedV1))
	cli(0, "contract", "register", "--topic", "held", "--type", "Thing", "--version", "1", "--schema", file("thing1.json", thingV1))
	cli(0, "contract", "policy", "--topic", "held", "--on-violation", "hold")
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--contracts-poll", "300ms")
	waitSlotActive(t, db.DSN, slot, p)
	insert := func(topic, typ string, version int, payload string) string {
		t.Helper()
		id := outbox.NewID()
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', '%s', 'k', '%s', %d, '%s')`, id, topic, typ, version, payload))
		return id
	}
	first := insert("orders", "OrderPlaced", 1, `{"order_id": 1}`)
	waitDrained(t, db.DSN, slot, time.Minute)
	// held holds the slot from here; orders streams on.
	heldEvent := insert("held", "Thing", 2, `{"n": 1, "tag": "x"}`)
	x := insert("orders", "OrderPlaced", 2, `{"order_id": 2, "currency": "EUR"}`)
	eventually(t, time.Minute, "x reaches _dead_letter", func() bool {
		_, ok := storedDeadLetters(t, store)[x]
		return ok
	})
	// The fix of x's contract, then of held's: its hold lifts and the
	// relay reads the stream again from it, x's transaction included.
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2.json", placedV2))
	time.Sleep(time.Second)
	cli(0, "contract", "mode", "--topic", "held", "--type", "Thing", "--compatibility", "NONE")
	cli(0, "contract", "register", "--topic", "held", "--type", "Thing", "--version", "2", "--schema", file("thing2.json", thingV2))
	eventually(t, time.Minute, "held resumes", func() bool {
		return slices.Equal(topicIDsSoFar(t, store, "held"), []string{heldEvent})
	})
	waitDrained(t, db.DSN, slot, time.Minute)
	if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, []string{first}) {
		t.Fatalf("orders holds %v after the replay: the dead-lettered event came back by itself", got)
	}
	res := redrive(t, env, "--topic", "orders")
	if res.Run.Republished != 1 {
		t.Fatalf("redrive: %+v", res.Run)
	}
	checkOnce(t, store, "orders", []string{first, x})
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}
