package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pgx/v5"
)

var heartbeatFlag = "2s"

// TestIdleDatabaseDoesNotPinWAL: the relay's database writes nothing while
// another database of the same cluster writes hundreds of MiB of WAL. The
// relay's slot keeps moving (its heartbeat and the idle acknowledgement),
// so the WAL it retains stays bounded instead of growing with the other
// database's writes.
func TestIdleDatabaseDoesNotPinWAL(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	// wal_sender_timeout = 0: the walsender sends no keepalive of its own,
	// so only the heartbeat gives the relay a position to acknowledge.
	srv := pgtest.NewServer(t, "wal_sender_timeout = 0")
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn}
	migrate(t, db.Conn(t))
	url, _ := localStore(t)
	p := startRelay(t, []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + url}, "--heartbeat", heartbeatFlag)
	waitSlotActive(t, dsn, "deltabus", p)
	ctx := context.Background()
	conn := db.Conn(t)
	if _, err := conn.Exec(ctx, `CREATE DATABASE busy`); err != nil {
		t.Fatal(err)
	}
	bconn, err := pgx.Connect(ctx, srv.DSN("busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer bconn.Close(ctx)
	conn = bconn
	if _, err := conn.Exec(ctx, `CREATE TABLE filler (x text)`); err != nil {
		t.Fatal(err)
	}
	var start, end int64
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&start); err != nil {
		t.Fatal(err)
	}
	var worst int64
	retained := func() int64 {
		var r int64
		if err := pgxQueryRow(t, db.DSN, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
			FROM pg_replication_slots WHERE slot_name = 'deltabus'`, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := 0; i < 40; i++ {
		if _, err := conn.Exec(ctx, `INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 5000) g`); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			worst = max(worst, retained())
		}
	}
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	written := end - start
	var last int64
	eventually(t, 30*time.Second, "the slot caught up with the other database's WAL", func() bool {
		last = retained()
		return last < written/10
	})
	t.Logf("other database wrote %.0f MiB of WAL; the relay's slot held back at most %.1f MiB meanwhile, %.1f MiB at the end",
		float64(written)/(1<<20), float64(worst)/(1<<20), float64(last)/(1<<20))
}
