package bootstrap_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// grouped are the topics of fill placed in group "g"; topic-3 (and the
// producers' topic-4) keep tables of their own.
var grouped = []string{"topic-0", "topic-1", "topic-2"}

func createGroup(t testing.TB, store storage.Store) {
	t.Helper()
	g := catalog.Group{Name: "g", Topics: []string{"topic-[0-2]"}, Created: time.Now().UTC()}
	if err := catalog.WriteGroup(t.Context(), store, g); err != nil {
		t.Fatal(err)
	}
}

// TestFirstStartWithGroups: `relay bootstrap` of an outbox whose topics
// are partly in a group writes the grouped topics' snapshot files into the
// group's table, one topic per file, and commits each with txn
// appId/topic at the consistent point - 1; a redo adds nothing (it reads
// what each topic holds from the group table); a lost slot recovered while
// producers write adds only what the topics lack. Every topic ends exact.
func TestFirstStartWithGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay binary")
	}
	const n = 20_000
	bin := buildRelay(t)
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	createGroup(t, store)

	out, err := runRelay(t, bin, db, url, 5*time.Minute, "bootstrap", "--connections", "2")
	if err != nil {
		t.Fatalf("relay bootstrap: %v\n%s", err, out)
	}
	if !strings.Contains(out, `group "g": 3 topics in table _group.g (topic-0, topic-1, topic-2)`) {
		t.Errorf("bootstrap output does not name the group's topics:\n%s", out)
	}
	m, _, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil {
		t.Fatal(err)
	}
	snapLSN := snapshotLSN(t, m)
	if got := checkTopics(t, db, store, cfg.AppID, snapLSN); got != n {
		t.Errorf("%d snapshot rows, want %d", got, n)
	}
	checkGroupTable(t, url, store, cfg.AppID, snapLSN)
	for _, name := range append(slices.Clone(grouped), "topic-3") {
		checkPhysicalOrder(t, db, store, name, snapLSN)
	}

	// A first start redone (it died after its commits, before the marker).
	ctx := testCtx(t, 5*time.Minute)
	res, err := bootstrap.Snapshot(ctx, cfg, store, bootstrap.Options{Log: testLog(t), Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range res.Topics {
		if tr.Added != 0 || tr.Skipped != n/numTopics || tr.Version != -1 {
			t.Errorf("redo: topic %s: %+v, want all %d events found, nothing committed", name, tr, n/numTopics)
		}
	}
	if res.Topics["topic-1"].Table != catalog.GroupTable("g") || res.Topics["topic-3"].Table != "topic-3" {
		t.Errorf("redo: tables %+v", res.Topics)
	}

	// The slot is lost while producers write; recovery adds what is missing.
	stopProducers := startProducers(t, db, 4, 2*time.Millisecond)
	stop := runInProcess(t, cfg, store)
	time.Sleep(time.Second)
	stop()
	dropSlotWhenFree(t, db, "deltabus")
	time.Sleep(500 * time.Millisecond)
	res, err = bootstrap.Recover(ctx, cfg, store, bootstrap.Options{Log: testLog(t)})
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	var added int64
	for _, name := range grouped {
		tr := res.Topics[name]
		added += tr.Added
		if tr.Skipped < n/numTopics {
			t.Errorf("recover: topic %s: %+v, want at least the %d pre-filled events found", name, tr, n/numTopics)
		}
	}
	if added == 0 {
		t.Errorf("recover added nothing to the group's topics: %+v", res.Topics)
	}
	m, _, _ = catalog.ReadMarker(t.Context(), store, cfg.AppID)
	stop = runInProcess(t, cfg, store)
	time.Sleep(time.Second)
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	t.Logf("recovery added %d events to the group's topics; %d produced concurrently", added, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
	compareAll(t, db, store)
}

// checkGroupTable checks the store right after a first start: the grouped
// topics live in the group's table only, are registered with its id, hold
// their txn appId/topic at the snapshot's version, and each of its files
// holds one topic; topic-3 has its own table with txn appId.
func checkGroupTable(t *testing.T, url string, store storage.Store, appID string, snapLSN int64) {
	t.Helper()
	table := catalog.GroupTable("g")
	snap, err := delta.LoadSnapshot(t.Context(), storage.Sub(store, table), -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Txns[appID]; ok {
		t.Errorf("group table holds a txn of the plain appId %s", appID)
	}
	for _, name := range grouped {
		p, err := catalog.Locate(t.Context(), store, name)
		if err != nil || p.Table != table || !p.Registered || p.TableID != snap.Metadata.ID {
			t.Errorf("topic %s placement %+v (%v), want registered in %s with id %s", name, p, err, table, snap.Metadata.ID)
		}
		if txn := snap.Txns[appID+"/"+name]; txn.Version != snapLSN {
			t.Errorf("topic %s: txn %+v, want version %d", name, txn, snapLSN)
		}
		if _, err := os.Stat(filepath.Join(strings.TrimPrefix(url, "file://"), name)); !os.IsNotExist(err) {
			t.Errorf("grouped topic %s has a folder of its own (%v)", name, err)
		}
	}
	for _, add := range snap.Files {
		lo, hi := topicBounds(t, add.Stats)
		if lo != hi || !slices.Contains(grouped, lo) {
			t.Errorf("snapshot file %s holds topics %q..%q; want one topic of the group", add.Path, lo, hi)
		}
	}
	if _, v := topicRows(t, store, "topic-3", appID); v != snapLSN {
		t.Errorf("topic-3: txn version %d, want %d", v, snapLSN)
	}
}

func topicBounds(t *testing.T, stats string) (lo, hi string) {
	var s struct {
		Min struct{ Topic string } `json:"minValues"`
		Max struct{ Topic string } `json:"maxValues"`
	}
	if err := json.Unmarshal([]byte(stats), &s); err != nil {
		t.Fatalf("stats %q: %v", stats, err)
	}
	return s.Min.Topic, s.Max.Topic
}

// compareAll checks the whole log against the outbox with package verify.
func compareAll(t *testing.T, db *pgtest.DB, store storage.Store) {
	t.Helper()
	rep, err := verify.Compare(t.Context(), db.Conn(t), "public.outbox", store)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify: %d source rows, problems:\n%s", rep.SourceRows, strings.Join(rep.Problems, "\n"))
	}
	for _, name := range grouped {
		if len(rep.Topics[name]) == 0 {
			t.Errorf("verify read no rows of grouped topic %s", name)
		}
	}
}

// TestRebuildGroupedTopicWhileStreaming: the relay's first start places
// three topics in a group; `relay rebuild` of one of them runs while
// producers write to every topic and the relay streams the others, the
// group's two others included, into the same table. The rebuild reads
// what the topic holds from the group table (its rows only, its txn
// appId/topic), and afterwards every topic holds exactly the outbox's
// rows, once each, in commit order.
func TestRebuildGroupedTopicWhileStreaming(t *testing.T) {
	n := 30_000
	if longRun() {
		n = 300_000
	}
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	createGroup(t, store)
	stopProducers := startProducers(t, db, 4, 2*time.Millisecond)
	stop := runInProcess(t, cfg, store)
	time.Sleep(time.Second)

	const name = "topic-1"
	res, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, name,
		bootstrap.RebuildOptions{Options: bootstrap.Options{Log: testLog(t)}})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	t.Logf("rebuild: %+v", res)
	if !res.Committed || res.Table != catalog.GroupTable("g") || res.Present < int64(n/numTopics) || len(res.Held) != 0 {
		t.Errorf("rebuild result %+v: want committed into the group table, the %d pre-filled events found, nothing held", res, n/numTopics)
	}
	time.Sleep(time.Second) // producers keep going across the seam
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	m, _, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows pre-filled, %d produced concurrently", n, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
	compareAll(t, db, store)
	if _, v := topicRows(t, store, name, cfg.AppID); v < int64(res.TxnVersion) {
		t.Errorf("topic %s: txn version %d below the rebuild's %d", name, v, int64(res.TxnVersion))
	}
	st, _, err := catalog.ReadRebuildState(t.Context(), store, cfg.AppID, name)
	if err != nil || st.Paused != "" || st.LastResolved != res.ID {
		t.Errorf("rebuild state after the rebuild: %+v, %v", st, err)
	}
}
