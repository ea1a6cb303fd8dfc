package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// backends counts db's SQL connections (client backends) other than the
// counting connection, and its walsenders.
func backends(t *testing.T, counter *pgx.Conn, db *pgtest.DB) (sql, wal int) {
	t.Helper()
	if err := counter.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()),
		count(*) FILTER (WHERE backend_type = 'walsender')
		FROM pg_stat_activity WHERE datname = $1`, db.Name).Scan(&sql, &wal); err != nil {
		t.Fatal(err)
	}
	return sql, wal
}

// TestAheadIsTheFirstSessionsOnly: the first session takes the connections
// dialled ahead; a later one dials its own; connections begun longer than
// predialMaxAge ago, or whose SQL dial failed (the database was not there
// yet), are dialled again; Discard leaves no backend behind.
func TestAheadIsTheFirstSessionsOnly(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	r := &Relay{cfg: Config{Source: db.DSN}}

	a := DialAhead(ctx, db.DSN)
	want, err := a.sql.wait()
	if err != nil {
		t.Fatal(err)
	}
	r.Ahead = a
	repl, sql, err := r.sessionConns(ctx)
	if err != nil || sql != want || repl != a.repl || r.Ahead != nil {
		t.Fatalf("first session: %v, SQL connection dialled ahead %v, replication %v, Ahead left %v", err, sql == want, repl == a.repl, r.Ahead)
	}
	repl2, sql2, err := r.sessionConns(ctx)
	if err != nil || sql2 == sql || repl2 == repl {
		t.Fatalf("second session reused the first's connections (%v)", err)
	}
	for _, c := range []func(context.Context) error{sql.Close, sql2.Close} {
		_ = c(ctx)
	}
	repl.discard()
	repl2.discard()

	a = DialAhead(ctx, db.DSN)
	old, _ := a.sql.wait()
	a.begun = a.begun.Add(-predialMaxAge - time.Second)
	r.Ahead = a
	repl, sql, err = r.sessionConns(ctx)
	if err != nil || sql == old {
		t.Fatalf("connections begun %v ago were used (%v)", predialMaxAge+time.Second, err)
	}
	_ = sql.Close(ctx)
	repl.discard()

	missing := strings.Replace(db.DSN, "/"+db.Name, "/"+db.Name+"_later", 1)
	r.Ahead = DialAhead(ctx, missing) // the database does not exist yet
	if _, err := r.Ahead.sql.wait(); err == nil {
		t.Fatal("a dial to a missing database succeeded")
	}
	repl, sql, err = r.sessionConns(ctx) // the session's own DSN: dialled again
	if err != nil {
		t.Fatalf("a failed dial ahead was not dialled again: %v", err)
	}
	_ = sql.Close(ctx)
	repl.discard()

	counter := db.Conn(t)
	// The sessions above closed their connections; their backends end a
	// moment later, and must not be counted as this dial's.
	waitNoBackends(t, counter, db, "left by the sessions above")
	d := DialAhead(ctx, db.DSN)
	<-d.repl.done
	if _, err := d.sql.wait(); err != nil {
		t.Fatal(err)
	}
	if n, w := backends(t, counter, db); n != 1 || w != 1 {
		t.Fatalf("dialled ahead: %d SQL backends and %d walsenders, want 1 and 1", n, w)
	}
	d.Discard()
	waitNoBackends(t, counter, db, "left after Discard")
}

// waitNoBackends waits until the database has no backend but counter's.
func waitNoBackends(t *testing.T, counter *pgx.Conn, db *pgtest.DB, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n, w := backends(t, counter, db); n != 0 || w != 0; n, w = backends(t, counter, db) {
		if time.Now().After(deadline) {
			t.Fatalf("%d SQL backends and %d walsenders %s", n, w, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAheadAgainstASilentServer: a server that accepts the connections
// and then says nothing makes the dials ahead end with their context and
// the session's own dials with the session's: sessionConns fails, it
// never waits without a deadline.
func TestAheadAgainstASilentServer(t *testing.T) {
	silent := silentDSN(t)

	aheadCtx, cancelAhead := context.WithTimeout(context.Background(), time.Second)
	defer cancelAhead()
	r := &Relay{cfg: Config{Source: silent}, Ahead: DialAhead(aheadCtx, silent)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	if repl, sql, err := r.sessionConns(ctx); err == nil {
		_ = sql.Close(context.Background())
		repl.discard()
		t.Fatal("sessionConns returned connections from a silent server")
	}
	if d := time.Since(began); d > 6*time.Second {
		t.Fatalf("sessionConns took %v against a silent server with deadlines of 1 and 2 s", d)
	}
}
