package bootstrap_test

import (
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
)

// TestRebuildAfterGroupTableDeleted: a group's table is deleted while the
// relay is down. The restarted relay holds each of the group's three
// topics (Missing) and streams the others. `relay rebuild --topic
// topic-1` recreates the group table and restores topic-1 into it, and
// says that the group's two other topics stay held; `relay rebuild
// --abort` of topic-0 starts it afresh in the new table from its hold; a
// rebuild of topic-2 restores it. Producers write to every topic
// throughout. Afterwards topic-1, topic-2 and the topics of their own are
// exact, topic-0 holds exactly the events since it was lost, and all
// three are registered with the new table's id.
func TestRebuildAfterGroupTableDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay binary")
	}
	bin := buildRelay(t)
	db := newOutbox(t)
	fill(t, db, 10_000)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	createGroup(t, store)
	stop := runInProcess(t, cfg, store)
	stopProducers := startProducers(t, db, 2, 2*time.Millisecond)
	time.Sleep(time.Second)
	stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	table := catalog.GroupTable("g")
	old := tableID(t, store, table)
	lostIDs := map[string]bool{}
	for _, id := range sourceIDs(t, db)["topic-0"] {
		lostIDs[id] = true
	}
	if err := os.RemoveAll(filepath.Join(strings.TrimPrefix(url, "file://"), table)); err != nil {
		t.Fatal(err)
	}

	stop = runInProcess(t, cfg, store)
	stopProducers = startProducers(t, db, 2, 2*time.Millisecond)
	waitHeld(t, store, cfg.AppID, grouped...)
	out, err := runRelay(t, bin, db, url, 5*time.Minute, "rebuild", "--topic", "topic-1")
	if err != nil || !strings.Contains(out, "committed by the relay") {
		t.Fatalf("rebuild of topic-1: %v\n%s", err, out)
	}
	for _, want := range []string{`of topic "topic-1" (group "g", table _group.g)`,
		"still held: 2 other topics of the group were in its lost table (topic-0, topic-2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("rebuild output lacks %q:\n%s", want, out)
		}
	}
	if id := tableID(t, store, table); id == old || id == "" {
		t.Errorf("group table id after the rebuild %q, was %q: want a new table", id, old)
	}
	if _, err := bootstrap.AbortRebuild(t.Context(), cfg, store, "topic-0"); err != nil {
		t.Fatal(err)
	}
	res, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, "topic-2",
		bootstrap.RebuildOptions{Options: bootstrap.Options{Log: testLog(t)}})
	if err != nil || !res.Committed || res.Present != 0 || slices.Contains(res.Held, "topic-1") {
		t.Fatalf("rebuild of topic-2: %+v, %v; want committed, nothing present, topic-1 not held", res, err)
	}
	time.Sleep(time.Second)
	live := stopProducers()
	want := sourceIDs(t, db)
	want["topic-0"] = slices.DeleteFunc(want["topic-0"], func(id string) bool { return lostIDs[id] })
	waitRows(t, store, cfg.AppID, want, 2*time.Minute)
	stop()
	t.Logf("%d events produced while the group table was lost and restored; %d of topic-0 lost with it", live, len(lostIDs))
	for name, ids := range want {
		checkExact(t, store, cfg.AppID, name, ids)
	}
	id := tableID(t, store, table)
	for _, name := range grouped {
		if p, err := catalog.Locate(t.Context(), store, name); err != nil || p.TableID != id {
			t.Errorf("topic %s: placement %+v (%v), want registered with the new table id %s", name, p, err, id)
		}
	}
}

func tableID(t *testing.T, store storage.Store, table string) string {
	t.Helper()
	snap, err := delta.LoadSnapshot(t.Context(), storage.Sub(store, table), -1)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return snap.Metadata.ID
}

// waitHeld waits until the relay holds each topic for its missing table.
func waitHeld(t *testing.T, store storage.Store, appID string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			st, _, _ := catalog.ReadRebuildState(t.Context(), store, appID, name)
			if st.Paused == catalog.HoldMissingTable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the relay did not hold topic %s, whose group table is missing: state %+v", name, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitRows waits until each topic holds as many events as want gives it.
func waitRows(t *testing.T, store storage.Store, appID string, want map[string][]string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		done := true
		for name, ids := range want {
			if refs, _ := topicRows(t, store, name, appID); len(refs) < len(ids) {
				done = false
				break
			}
		}
		if done {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkExact asserts the topic holds exactly the events ids, once each.
func checkExact(t *testing.T, store storage.Store, appID, name string, ids []string) {
	t.Helper()
	refs, _ := topicRows(t, store, name, appID)
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.ID] {
			t.Errorf("topic %s: event %s twice", name, r.ID)
		}
		seen[r.ID] = true
	}
	missing := 0
	for _, id := range ids {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 || len(seen) != len(ids) {
		t.Errorf("topic %s: %d distinct events, want %d; %d of them missing", name, len(seen), len(ids), missing)
	}
}
