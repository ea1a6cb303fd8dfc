package relay

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/tests/faultproxy"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// walsenders counts db's walsender backends.
func walsenders(t *testing.T, db *pgtest.DB) int {
	t.Helper()
	var n int
	if err := db.Conn(t).QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender' AND datname = $1`, db.Name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitWalsenders(t *testing.T, db *pgtest.DB, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := walsenders(t, db); n != want; n = walsenders(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("%d walsenders on %s, want %d", n, db.Name, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func identify(t *testing.T, c *pgconn.PgConn) {
	t.Helper()
	if _, err := pglogrepl.IdentifySystem(context.Background(), c); err != nil {
		t.Fatalf("the connection taken is not a replication connection: %v", err)
	}
}

// TestPredialHandsOverItsConnectionOnce: take returns the dialled
// replication connection; a second take, a take after discard and a take
// of a connection older than predialMaxAge dial a new one, and whatever
// the caller was not handed is closed, so a session never leaves a
// walsender behind.
func TestPredialHandsOverItsConnectionOnce(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()

	p := dialReplication(ctx, db.DSN)
	c1, err := p.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	identify(t, c1)
	p.discard() // after take: the connection is the caller's
	c2, err := p.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c2.PID() == c1.PID() {
		t.Fatal("a second take returned the connection already taken")
	}
	waitWalsenders(t, db, 2)
	c1.Close(ctx)
	c2.Close(ctx)
	waitWalsenders(t, db, 0)

	p = dialReplication(ctx, db.DSN)
	p.discard()
	waitWalsenders(t, db, 0)
	c3, err := p.take(ctx) // discarded: a new dial
	if err != nil {
		t.Fatal(err)
	}
	identify(t, c3)
	c3.Close(ctx)

	p = dialReplication(ctx, db.DSN)
	<-p.done
	old := p.conn.PID()
	p.at = p.at.Add(-predialMaxAge - time.Second)
	c4, err := p.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c4.PID() == old {
		t.Fatal("take returned a connection older than predialMaxAge")
	}
	identify(t, c4)
	waitWalsenders(t, db, 1)
	c4.Close(ctx)
	waitWalsenders(t, db, 0)
}

// silentDSN is a test database's DSN through a proxy that accepts
// connections and then passes nothing either way (a partition).
func silentDSN(t *testing.T) string {
	t.Helper()
	db := pgtest.NewDB(t)
	u, _ := url.Parse(db.DSN)
	proxy := faultproxy.NewTCP(t, u.Host)
	proxy.Set(faultproxy.TCPFault{Mode: faultproxy.BlackHole})
	return strings.Replace(db.DSN, u.Host, proxy.Addr(), 1)
}

// TestPredialAgainstASilentServer: a server that accepts the connection
// and then says nothing (a partition) makes the dial end with its
// context, and take with its own: neither waits without a deadline.
func TestPredialAgainstASilentServer(t *testing.T) {
	silent := silentDSN(t)

	dialCtx, cancelDial := context.WithTimeout(context.Background(), time.Second)
	defer cancelDial()
	began := time.Now()
	p := dialReplication(dialCtx, silent)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := p.take(ctx); err == nil {
		c.Close(context.Background())
		t.Fatal("take returned a connection from a silent server")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("take took %v against a silent server with a 2 s deadline", d)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the dial outlived its context by 4 s")
	}
	p.discard() // after take: nothing left to close, returns at once
}
