package pgcheckpoint_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/checkpointtest"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
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
