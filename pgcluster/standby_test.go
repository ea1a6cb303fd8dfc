package pgcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestStandbyFallsBehindAndIsPromoted: a standby made from a running
// primary replays its writes, stops receiving on request, and once
// promoted is on a new timeline whose history names the fork point at or
// before what it received; writes the primary made afterwards are not
// there.
func TestStandbyFallsBehindAndIsPromoted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary, err := StartServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	pc := connect(t, ctx, primary.DSN("postgres"))
	run(t, ctx, pc, "CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	standby, err := primary.NewStandby(ctx, StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	run(t, ctx, pc, "INSERT INTO t VALUES (2)")
	if err := primary.WaitCaughtUp(ctx, standby); err != nil {
		t.Fatal(err)
	}
	received, err := standby.StopReceiving(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, pc, "INSERT INTO t VALUES (3)")
	pc.Close(ctx)
	if err := primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	sc := connect(t, ctx, standby.DSN("postgres"))
	defer sc.Close(ctx)
	var n int
	if err := sc.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("promoted standby holds %d rows (%v), want 2: the write after the cut must be lost", n, err)
	}
	rc, err := pgconn.Connect(ctx, standby.DSN("postgres")+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	sys, err := pglogrepl.IdentifySystem(ctx, rc)
	if err != nil || sys.Timeline != 2 {
		t.Fatalf("IDENTIFY_SYSTEM = %+v, %v; want timeline 2", sys, err)
	}
	h, err := pglogrepl.TimelineHistory(ctx, rc, 2)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(h.Content))
	if len(fields) < 2 || fields[0] != "1" {
		t.Fatalf("timeline 2 history %q: want a line for timeline 1", h.Content)
	}
	fork, _ := pglogrepl.ParseLSN(fields[1])
	got, _ := pglogrepl.ParseLSN(received)
	if fork > got {
		t.Fatalf("fork point %s is past what the standby received (%s)", fork, got)
	}
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func run(t *testing.T, ctx context.Context, c *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, q := range sqls {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
