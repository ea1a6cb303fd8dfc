package reconcile

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// TestJanitorWaitsForAPacedGroup: rows of a grouped topic that the relay
// holds back until its group's next commit (the group's commit interval)
// are not durable, so the janitor deletes none of them until that commit;
// then every row it deletes is in the group's table.
func TestJanitorWaitsForAPacedGroup(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := migrations.Apply(ctx, db.Conn(t), migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := catalog.Group{Name: "m", Topics: []string{"m.*"}, CommitInterval: "6s", Created: time.Now()}
	if err := catalog.WriteGroup(ctx, root, g); err != nil {
		t.Fatal(err)
	}
	stop := runRelay(t, db.DSN, "file://"+dir)
	defer stop()

	// A first commit of the group's table starts its interval.
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('m.a', 'k', 'warm', '{}')`)
	deadline := time.Now().Add(30 * time.Second)
	for rows, _ := verify.ReadTopic(ctx, root, "m.a"); len(rows) == 0; rows, _ = verify.ReadTopic(ctx, root, "m.a") {
		if time.Now().After(deadline) {
			t.Fatal("the relay did not commit the group's first row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload, occurred_at)
		SELECT CASE WHEN i % 2 = 0 THEN 'm.a' ELSE 'm.b' END, 'k' || i, 'old', '{}', now() - interval '10 days'
		FROM generate_series(1, 40) AS i`)
	o := JanitorOptions{Retention: 7 * 24 * time.Hour, BatchSize: 7, DurableWait: time.Second}
	if _, err := RunJanitor(ctx, db.DSN, o, nil); err == nil || !strings.Contains(err.Error(), "nothing deleted") {
		t.Fatalf("janitor while the group's rows wait for its next commit: %v, want a refusal", err)
	}
	var n int
	conn := db.Conn(t)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'old'`).Scan(&n); err != nil || n != 40 {
		t.Fatalf("old rows %d (%v), want 40 untouched", n, err)
	}

	o.DurableWait = 30 * time.Second
	rep, err := RunJanitor(ctx, db.DSN, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deleted["public.outbox"] != 40 {
		t.Fatalf("deleted %v, want the 40 old rows", rep.Deleted)
	}
	var logged []string
	for _, name := range []string{"m.a", "m.b"} {
		rows, err := verify.ReadTopic(ctx, root, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			logged = append(logged, r.ID)
		}
	}
	if len(logged) != 41 || len(slices.Compact(slices.Sorted(slices.Values(logged)))) != 41 {
		t.Fatalf("the group's table holds %d rows of m.a and m.b, want the 41 inserted, each once", len(logged))
	}
}

// runRelay runs an in-process relay on the source's slot "deltabus"
// (first start included) until stop.
func runRelay(t *testing.T, dsn, store string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, _, err := daemon.New(ctx, relay.Config{Source: dsn, Store: store}, daemon.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	select {
	case <-r.Started():
	case err := <-runErr:
		t.Fatalf("relay stopped before streaming: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("relay did not start streaming")
	}
	return func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("relay: %v", err)
		}
	}
}
