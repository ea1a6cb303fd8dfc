package pgcheckpoint_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/checkpointtest"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func openStore(t *testing.T) (*pgcheckpoint.Store, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgcheckpoint.Open(context.Background(), pool, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

func TestConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) subscribe.Checkpoints {
		s, _ := openStore(t)
		return s
	}, checkpointtest.Options{Transactional: true, Fenced: true})
}

// TestStateAndCheckpointCommitTogether: what apply writes in the tx
// commits with the checkpoint, and rolls back with a refused one.
func TestStateAndCheckpointCommitTogether(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE state (n int)`); err != nil {
		t.Fatal(err)
	}
	insert := func(n int) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO state VALUES ($1)`, n)
			return err
		}
	}
	first := subscribe.Checkpoint{Group: "g", Topic: "orders", Position: subscribe.Position{Version: 1}}
	if err := s.Commit(ctx, nil, first, insert(1)); err != nil {
		t.Fatal(err)
	}
	// A stale first insert: the state write must roll back.
	if err := s.Commit(ctx, nil, first, insert(2)); !errors.Is(err, subscribe.ErrCheckpointMoved) {
		t.Fatalf("second first commit: %v", err)
	}
	var rows []int
	r, _ := pool.Query(ctx, `SELECT n FROM state ORDER BY n`)
	rows, err := pgx.CollectRows(r, pgx.RowTo[int])
	if err != nil || len(rows) != 1 || rows[0] != 1 {
		t.Fatalf("state rows %v %v, want [1]", rows, err)
	}
	if ddl := pgcheckpoint.DDL("app.cp"); !strings.HasPrefix(ddl, `CREATE TABLE IF NOT EXISTS "app"."cp" (`) {
		t.Errorf("DDL = %s", ddl)
	}
}

// TestGroupedTopicEffectivelyOnce: a consumer of one topic of a group,
// its checkpoint in PostgreSQL, applies each of the topic's events once
// and none of the group's other topics, across a failed batch; its
// checkpoint is on the group table.
func TestGroupedTopicEffectivelyOnce(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := grouptest.New(t, root, "m", []string{"m.*"}, grouptest.Options{MaxFileRows: 4})
	defer g.Close()
	for i := range 12 {
		g.Commit(slices.Repeat([]string{"m.b", "m.a", "m.c"}[:1+i%3], 1+i%4)...)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE applied (id text PRIMARY KEY, topic text)`); err != nil {
		t.Fatal(err)
	}
	batches := 0
	h := func(ctx context.Context, b *subscribe.Batch) error {
		if batches++; batches == 3 {
			return errors.New("injected failure")
		}
		for _, e := range b.Events {
			if _, err := b.Tx.Exec(ctx, `INSERT INTO applied VALUES ($1, $2)`, e.ID, e.Topic); err != nil {
				return err
			}
		}
		return nil
	}
	opts := subscribe.Options{Checkpoints: s, BatchSize: 2}
	if err := subscribe.Subscribe(ctx, root, "m.a", "billing", h, opts); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Subscribe = %v, want the handler's error", err)
	}
	if err := subscribe.Subscribe(ctx, root, "m.a", "billing", h, opts); err != nil {
		t.Fatal(err)
	}
	r, _ := pool.Query(ctx, `SELECT id FROM applied WHERE topic = 'm.a' ORDER BY id`)
	got, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil || !slices.Equal(got, g.IDs("m.a")) {
		t.Fatalf("applied %v %v, want %v", got, err, g.IDs("m.a"))
	}
	var others int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM applied WHERE topic <> 'm.a'`).Scan(&others); err != nil || others != 0 {
		t.Fatalf("%d events of other topics applied (%v)", others, err)
	}
	cp, ok, err := s.Load(ctx, "billing", "m.a")
	if err != nil || !ok || cp.Position != (subscribe.Position{Version: 13}) || cp.TableID != g.ID() {
		t.Fatalf("checkpoint %+v %t %v, want version 13 of the group table %s", cp, ok, err, g.ID())
	}
}
