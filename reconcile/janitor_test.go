package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestJanitorDeletesOnlyOldDurableRows(t *testing.T) {
	e := newEnv(t)
	old := events("orders", 23, time.Now().Add(-10*24*time.Hour), time.Hour)
	recent := events("orders", 5, time.Now().Add(-time.Hour), time.Minute)
	e.insertSource(old)
	e.insertSource(recent)
	ctx := context.Background()
	o := JanitorOptions{Retention: 7 * 24 * time.Hour, BatchSize: 5, Pause: time.Millisecond, DurableWait: 300 * time.Millisecond}

	// The relay has confirmed nothing: nothing may be deleted.
	if _, err := RunJanitor(ctx, e.db.DSN, o, nil); err == nil || !strings.Contains(err.Error(), "nothing deleted") {
		t.Fatalf("janitor with a stalled slot: %v, want a refusal", err)
	}
	var n int
	conn := e.db.Conn(t)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil || n != 28 {
		t.Fatalf("rows %d (%v), want 28 untouched", n, err)
	}
	e.advanceSlot()
	o.DurableWait = 10 * time.Second
	rep, err := RunJanitor(ctx, e.db.DSN, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deleted["public.outbox"] != 23 || rep.Batches != 5 {
		t.Fatalf("deleted %v in %d batches, want 23 in 5", rep.Deleted, rep.Batches)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE occurred_at > now() - interval '2 hours'`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("recent rows %d (%v), want 5", n, err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows %d (%v), want 5", n, err)
	}
}
