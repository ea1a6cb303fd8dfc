package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/usererr"
	"github.com/deltabus/deltabus/verify"
)

// TestRebuildLostTopicWhileStreaming: a topic's table is lost while the
// relay is down; the restarted relay holds that topic (the registry lists
// it: recreating it empty would lose its history) and streams the others.
// `relay rebuild` then re-snapshots the topic while four producers keep
// inserting into every topic: afterwards every topic holds exactly the
// outbox's rows, once each, and the rebuilt one holds its snapshot rows
// before every streamed row.
func TestRebuildLostTopicWhileStreaming(t *testing.T) {
	n := 50_000
	if longRun() {
		n = 500_000
	}
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	stopProducers := startProducers(t, db, 4, 0)

	stop := runInProcess(t, cfg, store)
	time.Sleep(time.Second)
	stop()
	lost := "topic-1"
	if err := os.RemoveAll(filepath.Join(url[len("file://"):], lost)); err != nil {
		t.Fatal(err)
	}
	stop = runInProcess(t, cfg, store)
	time.Sleep(time.Second)

	res, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, lost,
		bootstrap.RebuildOptions{Options: bootstrap.Options{Log: testLog(t)}})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	t.Logf("rebuild: %+v", res)
	if !res.Committed || res.Added == 0 || res.Rows < int64(n/numTopics) {
		t.Errorf("rebuild result %+v: want committed, events added, at least %d rows", res, n/numTopics)
	}
	time.Sleep(time.Second) // producers keep going across the seam
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	m, ok, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil || !ok {
		t.Fatalf("no marker: %v", err)
	}
	t.Logf("%d rows pre-filled, %d produced concurrently", n, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
	st, _, err := catalog.ReadRebuildState(t.Context(), store, cfg.AppID, lost)
	if err != nil || st.Paused != "" || st.ResolvedThrough == "" {
		t.Errorf("relay rebuild state after the rebuild: %+v, %v", st, err)
	}
	rows, err := verify.ReadTopic(t.Context(), store, lost)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if snap := r.CommitLSN == int64(res.TxnVersion); snap != (i < int(res.Added)) {
			t.Fatalf("rebuilt topic, row %d in version order: commit_lsn %d; want the %d snapshot rows (at %d) first", i, r.CommitLSN, res.Added, int64(res.TxnVersion))
		}
	}
}

// TestAbortMissingTable: with a topic held because its table is missing,
// `relay rebuild --abort` starts the topic afresh from where it was held:
// every event from there on, once each, and the other topics untouched.
func TestAbortMissingTable(t *testing.T) {
	db := newOutbox(t)
	fill(t, db, 5_000)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	stop := runInProcess(t, cfg, store)
	stop()
	const lost = "topic-0"
	if err := os.RemoveAll(filepath.Join(url[len("file://"):], lost)); err != nil {
		t.Fatal(err)
	}
	var before int
	db.Conn(t).QueryRow(t.Context(), "SELECT count(*) FROM outbox WHERE topic = $1", lost).Scan(&before)
	stop = runInProcess(t, cfg, store)
	stopProducers := startProducers(t, db, 2, 2*time.Millisecond)
	deadline := time.Now().Add(time.Minute)
	for {
		st, _, _ := catalog.ReadRebuildState(t.Context(), store, cfg.AppID, lost)
		if st.Paused != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay did not hold the topic whose table is missing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := bootstrap.AbortRebuild(t.Context(), cfg, store, lost); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	stopProducers()
	var after int
	db.Conn(t).QueryRow(t.Context(), "SELECT count(*) FROM outbox WHERE topic = $1", lost).Scan(&after)
	deadline = time.Now().Add(time.Minute)
	var got []topic.EventRef
	for time.Now().Before(deadline) {
		if got, _ = topicRows(t, store, lost, cfg.AppID); len(got) >= after-before {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	seen := map[string]bool{}
	for _, r := range got {
		if seen[r.ID] {
			t.Errorf("event %s twice", r.ID)
		}
		seen[r.ID] = true
	}
	if len(seen) != after-before {
		t.Errorf("topic %s after abort holds %d events; want the %d produced since the restart", lost, len(seen), after-before)
	}
}

// TestRebuildUnreadableTable: a topic's log is damaged under the running
// relay. The rebuild pauses the topic, finds the table unreadable and stops
// with the instruction to move it away, leaving the topic paused so
// nothing writes there; a restarted relay holds that topic and streams the
// others; after the move a second rebuild restores it. Every topic then
// holds exactly the outbox's rows.
func TestRebuildUnreadableTable(t *testing.T) {
	db := newOutbox(t)
	fill(t, db, 20_000)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	stopProducers := startProducers(t, db, 4, 2*time.Millisecond)
	stop := runInProcess(t, cfg, store)
	time.Sleep(time.Second)
	const damaged = "topic-3"
	dir := filepath.Join(url[len("file://"):], damaged)
	if err := os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000000.json")); err != nil {
		t.Fatal(err)
	}
	opts := bootstrap.RebuildOptions{Options: bootstrap.Options{Log: testLog(t)}}
	_, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, damaged, opts)
	if err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), "move the table away") {
		t.Fatalf("rebuild of an unreadable table: %v; want a user error saying to move it away", err)
	}
	t.Logf("first rebuild: %v", err)
	st, _, err := catalog.ReadRebuildState(t.Context(), store, cfg.AppID, damaged)
	if err != nil || st.Paused == "" {
		t.Fatalf("topic not left paused: %+v, %v", st, err)
	}
	// A restarted relay holds the topic whose log is broken and streams the
	// others, rather than failing every session.
	stop()
	stop = runInProcess(t, cfg, store)
	time.Sleep(500 * time.Millisecond)
	if err := os.Rename(dir, dir+".damaged"); err != nil {
		t.Fatal(err)
	}
	res, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, damaged, opts)
	if err != nil || !res.Committed || res.Present != 0 {
		t.Fatalf("second rebuild: %+v, %v; want committed into a new table", res, err)
	}
	time.Sleep(500 * time.Millisecond)
	stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	m, _, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil {
		t.Fatal(err)
	}
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
}
