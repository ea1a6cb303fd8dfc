package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// TestRestoreInPlaceIsRefusedThenRecovered: the database is restored in
// place from a cold copy taken before the relay published 100 more events
// (same system identifier, same timeline, the copy's slot with it), and
// new transactions are written. The relay refuses to stream (its topic
// holds positions past the source's WAL end: the new transactions would be
// skipped as relayed), naming the recovery; `relay bootstrap --recover`
// re-reads the outbox and begins an epoch above every position. Every row
// of the restored outbox is then in its topic once, and the only events
// the topic holds that the source lacks are the 100 the restore took back.
func TestRestoreInPlaceIsRefusedThenRecovered(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	db := &pgtest.DB{Name: "postgres", DSN: srv.DSN("postgres")}
	migrate(t, db.Conn(t))
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	relayed := func(n int, key string) {
		t.Helper()
		p := startRelay(t, env)
		waitSlotActive(t, db.DSN, "deltabus", p)
		db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', '`+key+`' || g, 'Created', '{}' FROM generate_series(1, `+strconv.Itoa(n)+`) g`)
		waitDrained(t, db.DSN, "deltabus", time.Minute)
		if err := p.stop(time.Minute); err != nil {
			t.Fatalf("relay did not stop: %v", err)
		}
	}
	relayed(100, "kept")
	backup := filepath.Join(t.TempDir(), "data")
	if err := srv.StopServer(ctx); err != nil {
		t.Fatal(err)
	}
	replaceDataDir(t, srv.DataDir, backup)
	if err := srv.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	relayed(100, "lost")
	lost := outboxIDs(t, db.DSN, "lost%")
	if err := srv.StopServer(ctx); err != nil {
		t.Fatal(err)
	}
	replaceDataDir(t, backup, srv.DataDir)
	if err := srv.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'new' || g, 'Created', '{}' FROM generate_series(1, 30) g`)

	p := startRelay(t, env)
	if out := waitExit(t, p, time.Minute); !strings.Contains(out, "past the source's WAL end") || !strings.Contains(out, "relay bootstrap --recover") {
		t.Fatalf("the relay on a database restored in place did not refuse naming the recovery:\n%s", p.tail())
	}
	if code, stdout, stderr := runCLI(t, env, "bootstrap", "--recover"); code != 0 {
		t.Fatalf("bootstrap --recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	relayed(20, "after")
	rows, err := verify.ReadTopic(ctx, store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	slices.Sort(got)
	want := append(outboxIDs(t, db.DSN, "%"), lost...)
	slices.Sort(want)
	if len(want) != 250 || !slices.Equal(got, want) {
		t.Fatalf("the topic holds %d events; want each of the restored outbox's %d rows and the %d the restore took back, once",
			len(got), len(want)-len(lost), len(lost))
	}
}

// replaceDataDir replaces dst with a copy of src, owners and modes kept
// (a data directory must stay the postgres user's, 0700).
func replaceDataDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("rm", "-rf", dst).CombinedOutput(); err != nil {
		t.Fatalf("rm %s: %v %s", dst, err, out)
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v %s", src, dst, err, out)
	}
}

// outboxIDs returns the ids of the outbox rows whose key is like pattern,
// sorted.
func outboxIDs(t testing.TB, dsn, pattern string) []string {
	t.Helper()
	return queryStrings(t, dsn, "SELECT id::text FROM outbox WHERE key LIKE $1 ORDER BY 1", pattern)
}

// queryStrings runs a query of one text column on dsn and returns its rows.
func queryStrings(t testing.TB, dsn, query string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
