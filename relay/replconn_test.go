package relay

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/tests/faultproxy"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// startStream starts replication on a new slot of db through addr (the
// server's own address or a proxy's), returning the connection and the
// server's WAL position at the start.
func startStream(t *testing.T, db *pgtest.DB, addr string) (*pgReplication, pglogrepl.LSN) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	conn, err := pgconn.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, "endstream", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "CREATE PUBLICATION endstream FOR ALL TABLES")
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, "endstream", 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'endstream'"}}); err != nil {
		t.Fatal(err)
	}
	return &pgReplication{PgConn: conn}, sys.XLogPos
}

// TestEndStreamLeavesTheSlotConfirmed: once EndStream returns, the slot
// shows the last acknowledgement sent, with no wait (--stop-at's promise).
func TestEndStreamLeavesTheSlotConfirmed(t *testing.T) {
	db := pgtest.NewDB(t)
	u, _ := url.Parse(db.DSN)
	c, at := startStream(t, db, u.Host)
	ctx := context.Background()
	if err := c.SendStatus(ctx, at, at, false); err != nil {
		t.Fatal(err)
	}
	if err := c.EndStream(ctx); err != nil {
		t.Fatal(err)
	}
	var confirmed bool
	if err := db.Conn(t).QueryRow(ctx, `SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'endstream'`,
		at.String()).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	if !confirmed {
		t.Fatalf("EndStream returned with the slot behind %s", at)
	}
}

// TestEndStreamFailsWhenTheServerGoesSilent: a server that stops answering
// (a partition: nothing forwarded, nothing closed) makes EndStream fail at
// its context's deadline, not hang.
func TestEndStreamFailsWhenTheServerGoesSilent(t *testing.T) {
	db := pgtest.NewDB(t)
	u, _ := url.Parse(db.DSN)
	proxy := faultproxy.NewTCP(t, u.Host)
	c, _ := startStream(t, db, proxy.Addr())
	proxy.Set(faultproxy.TCPFault{Mode: faultproxy.BlackHole})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := c.EndStream(ctx)
	if err == nil {
		t.Fatal("EndStream returned nil from a silent server")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("EndStream took %v against a silent server with a 2 s deadline", d)
	}
	t.Logf("EndStream against a silent server: %v", err)
}
