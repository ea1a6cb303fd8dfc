package bootstrap_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/telemetry"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestSnapshotCopiesEveryRowOnceAndRedoIsIdempotent: a snapshot copies
// every row into its topic (bad rows into the dead-letter topic), at
// commit_lsn = consistent point - 1, in physical order within each file,
// writes the marker; running it again (an interrupted first start being redone) adds
// nothing.
func TestSnapshotCopiesEveryRowOnceAndRedoIsIdempotent(t *testing.T) {
	db := newOutbox(t)
	fill(t, db, 20_000)
	db.Exec(t, `INSERT INTO outbox (id, topic, key, type, payload, occurred_at) VALUES ('0b0e4a8e-0000-4000-8000-000000000001', 'Bad Topic', 'k', 'x', '{}', '2026-01-01')`)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	ctx := testCtx(t, 2*time.Minute)

	tel, err := telemetry.New(ctx, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := tel.Gatherer
	res, err := bootstrap.Snapshot(ctx, cfg, store, bootstrap.Options{Log: testLog(t), Connections: 3, Metrics: tel.Meter})
	if err != nil {
		t.Fatal(err)
	}
	if v := gathered(t, reg, "deltabus_bootstrap_rows_read_total"); v != 20_001 {
		t.Errorf("deltabus_bootstrap_rows_read_total = %v, want 20001", v)
	}
	if v := gathered(t, reg, "deltabus_bootstrap_events_added_total"); v != 20_001 {
		t.Errorf("deltabus_bootstrap_events_added_total = %v, want 20001", v)
	}
	if res.Rows != 20_001 || res.DroppedSlot {
		t.Fatalf("rows %d dropped %v, want 20001 false", res.Rows, res.DroppedSlot)
	}
	snapLSN := int64(res.ConsistentPoint) - 1
	dl := res.Topics[outbox.DeadLetterTopic]
	if dl.Added != 1 {
		t.Fatalf("dead letters added: %+v", res.Topics)
	}
	// The bad row is in the dead-letter topic, not a topic of its own.
	db.Exec(t, `DELETE FROM outbox WHERE topic = 'Bad Topic'`)
	if n := checkTopics(t, db, store, cfg.AppID, snapLSN); n != 20_000 {
		t.Errorf("%d snapshot rows in the topics, want 20000", n)
	}
	for name, tr := range res.Topics {
		if _, v := topicRows(t, store, name, cfg.AppID); v != snapLSN || tr.Version != 1 {
			t.Errorf("topic %s: txn version %d (want %d), commit version %d (want 1)", name, v, snapLSN, tr.Version)
		}
		if name != outbox.DeadLetterTopic {
			checkPhysicalOrder(t, db, store, name, snapLSN)
		}
	}
	checkEventFields(t, db, store, "topic-2")
	m, ok, err := catalog.ReadMarker(ctx, store, cfg.AppID)
	if err != nil || !ok || m.ConsistentPoint != res.ConsistentPoint.String() || m.SystemID == "" {
		t.Fatalf("marker %+v %v %v", m, ok, err)
	}

	// Redo with the dead letter back: everything is already there.
	db.Exec(t, `INSERT INTO outbox (id, topic, key, type, payload, occurred_at) VALUES ('0b0e4a8e-0000-4000-8000-000000000001', 'Bad Topic', 'k', 'x', '{}', '2026-01-01')`)
	res2, err := bootstrap.Snapshot(ctx, cfg, store, bootstrap.Options{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res2.DroppedSlot || res2.ConsistentPoint <= res.ConsistentPoint {
		t.Fatalf("redo: dropped %v cp %s after %s", res2.DroppedSlot, res2.ConsistentPoint, res.ConsistentPoint)
	}
	for name, tr := range res2.Topics {
		if tr.Added != 0 || tr.Version != -1 {
			t.Errorf("redo: topic %s: %+v, want nothing added", name, tr)
		}
	}
	if res2.Topics["topic-1"].Skipped != 5000 || res2.Topics[outbox.DeadLetterTopic].Skipped != 1 {
		t.Errorf("redo: %+v", res2.Topics)
	}
	db.Exec(t, `DELETE FROM outbox WHERE topic = 'Bad Topic'`)
	checkTopics(t, db, store, cfg.AppID, snapLSN)
}

// checkEventFields compares every field of a topic's events with the
// outbox rows (COPY text escapes, NULL headers, timestamps).
func checkEventFields(t *testing.T, db *pgtest.DB, store storage.Store, name string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	type row struct {
		key, typ, payload string
		headers           *string
		occurred          time.Time
	}
	want := map[string]row{}
	rows, err := db.Conn(t).Query(ctx, `SELECT id::text, key, type, payload::text, headers::text, occurred_at FROM outbox WHERE topic = $1`, name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.key, &r.typ, &r.payload, &r.headers, &r.occurred); err != nil {
			t.Fatal(err)
		}
		want[id] = r
	}
	st := storage.Sub(store, name)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, add := range snap.Files {
		err := topic.ReadEvents(ctx, st, add, func(e outbox.Event) error {
			got++
			w, ok := want[e.ID]
			switch {
			case !ok:
				t.Errorf("event %s not in the outbox", e.ID)
			case e.Key != w.key || e.Type != w.typ || e.Payload != w.payload || !e.OccurredAt.Equal(w.occurred) ||
				(e.Headers == nil) != (w.headers == nil) || (e.Headers != nil && *e.Headers != *w.headers) || e.Xid != 0:
				t.Errorf("event %s = %+v, outbox row %+v", e.ID, e, w)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got != len(want) {
		t.Errorf("topic %s: %d events, outbox has %d rows", name, got, len(want))
	}
}

// gathered sums the values of a counter family.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func longRun() bool { return os.Getenv("DELTABUS_LONG") == "1" }
