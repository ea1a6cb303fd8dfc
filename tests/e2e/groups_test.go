package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

// groupTopics are the topics of TestTopicGroup: 24 low-rate topics in the
// group "iot", and two topics with tables of their own.
func groupTopics() (grouped, all []string) {
	for i := range 24 {
		grouped = append(grouped, fmt.Sprintf("iot.s%02d", i))
	}
	return grouped, append(slices.Clone(grouped), "orders", "payments")
}

// TestTopicGroup: 24 topics share the table of group "iot" beside two
// topics with their own tables. Four producers write transactions that
// span grouped and ungrouped topics while the relay is SIGKILLed and
// restarted; one topic of the group is rebuilt while the relay streams the
// others; more kills follow. Then every topic is exact against an
// independent slot's commit order, row by row; the group's topics have no
// tables of their own, one commit of the group table served several
// topics, and consumers of single topics (relay consume) each see exactly
// their topic's events, in order.
func TestTopicGroup(t *testing.T) {
	url, store := localStore(t)
	topicGroupTest(t, url, store, nil)
}

// TestTopicGroupS3 is the same against a real S3 server (versitygw).
func TestTopicGroupS3(t *testing.T) {
	b := s3test.NewBucket(t)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"DELTABUS_S3_ENDPOINT=" + b.Endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region,
		"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey}
	topicGroupTest(t, b.URL("bus"), store, env)
}

func topicGroupTest(t *testing.T, url string, store storage.Store, extraEnv []string) {
	ctx := context.Background()
	grouped, all := groupTopics()
	if err := catalog.WriteGroup(ctx, store, catalog.Group{Name: "iot", Topics: []string{"iot.*"}}); err != nil {
		t.Fatal(err)
	}
	events, kills := crashScale()
	db := setup(t)
	truth := newTruthSlot(t, db, "deltabus")
	env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}, extraEnv...)
	args := []string{"--standby", "--batch-max-events", "2000"}
	p := startRelay(t, env, args...)
	procs := []*relayProc{p}
	t.Cleanup(func() { logProblems(t, procs) })
	waitSlotActive(t, db.DSN, "deltabus", p)

	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// Paced so that production outlasts the kills and the rebuild: each
	// lands while transactions are being written and relayed.
	prod := producers{topics: all, rate: 1200}
	produced := make(chan struct{})
	go func() { prod.run(pctx, t, db.DSN, 4, events); close(produced) }()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	killSome := func(n int) {
		for range n {
			time.Sleep(time.Duration(150+rng.IntN(900)) * time.Millisecond)
			if done, err := p.exited(); done {
				t.Fatalf("relay exited on its own: %v\n%s", err, p.tail())
			}
			p.kill()
			t.Logf("SIGKILL after %d events written", prod.written.Load())
			p = startRelay(t, env, args...)
			procs = append(procs, p)
		}
	}
	killSome(kills / 2)
	rebuilt := grouped[7]
	waitSlotActive(t, db.DSN, "deltabus", p)
	code, stdout, stderr := runCLI(t, env, "rebuild", "--topic", rebuilt)
	if code != 0 || !strings.Contains(stdout, "committed by the relay") {
		t.Fatalf("rebuild of %s: exit %d\n%s\n%s\nrelay:\n%s", rebuilt, code, stdout, stderr, p.tail())
	}
	t.Logf("rebuild of %s: %s (written so far: %d)", rebuilt, strings.TrimSpace(stdout), prod.written.Load())
	killSome(kills - kills/2)
	<-produced
	waitSlotActive(t, db.DSN, "deltabus", p)
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop cleanly on SIGTERM: %v\n%s", err, p.tail())
	}
	rows := truth.read(t)
	if len(rows) != events {
		t.Fatalf("truth slot saw %d inserts, producers wrote %d", len(rows), events)
	}
	checkAfterRebuildInPlace(t, store, rows, rebuilt)
	checkGroupLayout(t, store, grouped)
	for _, tp := range []string{grouped[3], rebuilt, "orders"} {
		checkConsumer(t, env, store, tp)
	}
}

// checkAfterRebuildInPlace checks every topic against the source after
// topic tp was rebuilt with its table in place: the others exactly in
// source commit order; tp with every source row once, in source commit
// order but for one block of snapshot rows (commit_lsn = the rebuild's txn
// version: the events committed after the pause that tp did not hold
// yet, in the table's physical order), which sits exactly where those
// rows' transactions fall in the source order, before the seam's end.
func checkAfterRebuildInPlace(t *testing.T, store storage.Store, rows []truthRow, tp string) {
	t.Helper()
	checkAfterRebuildWith(t, store, rows, tp, checkRebuiltInPlace)
}

// checkRebuiltInPlace is checkAfterRebuildInPlace's rule for tp's rows.
func checkRebuiltInPlace(t testing.TB, tp string, got []verify.Logged, want []truthRow, rec catalog.RebuildRecord) {
	t.Helper()
	seamEnd, err := pglogrepl.ParseLSN(rec.SeamEnd)
	if err != nil {
		t.Fatal(err)
	}
	pos := make(map[string]int, len(want))
	for i, r := range want {
		pos[r.ID] = i
	}
	// The source positions, in table order: they must be 0..n-1 with the
	// snapshot block's own order free.
	next, block, blockMax := 0, 0, -1
	inBlock, afterBlock := false, false
	seen := map[string]bool{}
	for i, g := range got {
		k, ok := pos[g.ID]
		if !ok || seen[g.ID] {
			t.Fatalf("topic %s: row %d (%s): not a source row of the topic, or twice", tp, i, g.ID)
		}
		seen[g.ID] = true
		src := want[k]
		if g.CommitLSN == rec.TxnVersion && pglogrepl.LSN(g.CommitLSN) != src.CommitLSN {
			if afterBlock {
				t.Fatalf("topic %s: snapshot row %s after the rows streamed past the seam", tp, g.ID)
			}
			if src.CommitLSN >= seamEnd {
				t.Errorf("topic %s: %s committed at %s, after the seam's end %s, came with the snapshot", tp, g.ID, src.CommitLSN, seamEnd)
			}
			inBlock, block, blockMax = true, block+1, max(blockMax, k)
			continue
		}
		if inBlock {
			inBlock, afterBlock = false, true
			if next+block != blockMax+1 {
				t.Fatalf("topic %s: the snapshot block's %d rows are not the next %d of the source (up to position %d)", tp, block, block, blockMax)
			}
			next += block
		}
		if pglogrepl.LSN(g.CommitLSN) != src.CommitLSN || k != next {
			t.Fatalf("topic %s: streamed row %s is source row %d, want %d (out of commit order, or a gap)", tp, g.ID, k, next)
		}
		next++
	}
	if inBlock {
		next += block
	}
	if len(seen) != len(want) || next != len(want) {
		t.Errorf("topic %s: %d distinct source rows after the rebuild, %d in the source", tp, len(seen), len(want))
	}
	t.Logf("topic %s after its rebuild: %d rows, %d of them from the snapshot", tp, len(got), block)
}

// checkGroupLayout checks that the grouped topics live in the group's
// table only, each registered there, and that its commits served several
// topics at once.
func checkGroupLayout(t *testing.T, store storage.Store, grouped []string) {
	t.Helper()
	ctx := context.Background()
	table := catalog.GroupTable("iot")
	for _, tp := range grouped {
		p, err := catalog.ReadPlacement(ctx, store, tp, nil)
		if err != nil || !p.Registered || p.Table != table {
			t.Fatalf("topic %s placed %+v (%v), want registered in %s", tp, p, err, table)
		}
		if objs, err := storage.Sub(store, tp).List(ctx, "", ""); err != nil || len(objs) > 0 {
			t.Fatalf("grouped topic %s has a folder of its own (%d objects, %v)", tp, len(objs), err)
		}
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, table), -1)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for v := int64(1); v <= snap.Version; v++ {
		b, err := storage.Sub(store, table).Get(ctx, delta.CommitKey(v))
		if err != nil {
			continue // cleaned up or checkpointed past: not needed here
		}
		if strings.Count(string(b), `"txn":`) > 1 {
			shared++
		}
	}
	if shared == 0 {
		t.Fatalf("no commit of %s among %d versions held more than one topic", table, snap.Version)
	}
	t.Logf("%s: %d versions, %d of them commits of several topics", table, snap.Version, shared)
}

// checkConsumer reads topic tp as a new consumer group with `relay
// consume` and checks that it gets exactly the topic's events, each once,
// in the order the table holds them.
func checkConsumer(t *testing.T, env []string, store storage.Store, tp string) {
	t.Helper()
	want, err := verify.ReadTopic(context.Background(), store, tp)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, env, "consume", "--topic", tp, "--group", "check-"+strings.ReplaceAll(tp, ".", "-"))
	if code != 0 {
		t.Fatalf("consume %s: exit %d: %s", tp, code, stderr)
	}
	var got []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			EventID string `json:"event_id"`
			Topic   string `json:"topic"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("consume %s: line %q: %v", tp, sc.Text(), err)
		}
		if ev.Topic != tp {
			t.Fatalf("a consumer of %s got an event of %s (%s)", tp, ev.Topic, ev.EventID)
		}
		got = append(got, ev.EventID)
	}
	ids := make([]string, len(want))
	for i, r := range want {
		ids[i] = r.ID
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("consumer of %s got %d events, the table holds %d (first difference at %d)", tp, len(got), len(ids), firstDiff(got, ids))
	}
	t.Logf("consumer of %s: %d events, exactly the topic's, in order", tp, len(got))
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
