package bootstrap_test

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestSeamUnderConcurrentProducers: four producers insert at full speed
// while the relay bootstraps a pre-filled outbox and then streams; at the
// end every topic holds exactly the outbox's rows, once each, snapshot rows
// (at consistent point - 1, in (occurred_at, id) order) before streamed ones.
func TestSeamUnderConcurrentProducers(t *testing.T) {
	n := 200_000
	if longRun() {
		n = 1_000_000
	}
	if testing.Short() {
		n = 20_000
	}
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)

	stopProducers := startProducers(t, db, 4, 0)
	time.Sleep(300 * time.Millisecond) // producers are running when the slot is created

	stop := runInProcess(t, cfg, store)
	time.Sleep(time.Second) // producers keep going across the seam
	live := stopProducers()
	t.Logf("snapshot of %d rows, %d rows produced concurrently", n, live)

	m, ok, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil || !ok {
		t.Fatalf("no marker after bootstrap: %v", err)
	}
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	stop()
	snapRows := checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
	if snapRows < n {
		t.Errorf("%d snapshot rows, want at least the %d pre-filled", snapRows, n)
	}
}

func snapshotLSN(t testing.TB, m catalog.Marker) int64 {
	cp, err := parseLSN(m.ConsistentPoint)
	if err != nil {
		t.Fatalf("marker consistent point %q: %v", m.ConsistentPoint, err)
	}
	return cp - 1
}

// waitCaughtUp polls until the topics hold as many distinct events as the
// outbox (or the deadline passes; checkTopics then reports the difference).
func waitCaughtUp(t testing.TB, db *pgtest.DB, store storage.Store, appID string, d time.Duration) {
	t.Helper()
	want := 0
	for _, ids := range sourceIDs(t, db) {
		want += len(ids)
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		got := 0
		names, err := catalog.ListTopics(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			refs, _ := topicRows(t, store, name, appID)
			got += len(refs)
		}
		if got >= want {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
