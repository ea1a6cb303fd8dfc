package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// rolesSQL is the repository's least-privilege script (deploy/sql).
func rolesSQL(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "sql", "roles.sql")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// asRole is db's DSN for another role (the test cluster trusts local
// connections, so the roles need no password here).
func asRole(db *pgtest.DB, role string) string {
	return strings.Replace(db.DSN, "postgres://postgres@", "postgres://"+role+"@", 1)
}

// applyRoles runs deploy/sql/roles.sql with psql as the superuser.
func applyRoles(t testing.TB, db *pgtest.DB, producer string) {
	t.Helper()
	db.Exec(t, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+producer+`') THEN CREATE ROLE `+producer+` LOGIN; END IF;
	END $$`)
	cmd := exec.Command(filepath.Join(pgcluster.BinDir, "psql"), "-X", "-q", "-v", "producer_role="+producer, "-d", db.DSN, "-f", rolesSQL(t))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql -f roles.sql: %v\n%s", err, out)
	}
}

// TestLeastPrivilegeRoles runs every command as the role the README gives
// it, never as a superuser: migrate as deltabus_migrate, run (with a first
// start that copies existing rows) and rebuild as deltabus_relay, reconcile
// as deltabus_reconcile, janitor as deltabus_janitor; producers write as a
// role with INSERT only. The topics end equal to the source.
func TestLeastPrivilegeRoles(t *testing.T) {
	db := pgtest.NewDB(t)
	applyRoles(t, db, "app_producer")
	url, store := localStore(t)
	env := func(role string) []string {
		return []string{"DELTABUS_SOURCE=" + asRole(db, role), "DELTABUS_STORE=" + url}
	}
	if code, out, errOut := runCLI(t, env("deltabus_migrate"), "migrate"); code != 0 {
		t.Fatalf("migrate as deltabus_migrate: exit %d\n%s%s", code, out, errOut)
	}
	truth := newTruthSlot(t, db, "deltabus")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var before producers
	before.run(ctx, t, asRole(db, "app_producer"), 2, 600) // rows a first start must copy
	s := &scenario{t: t, db: db, truth: truth, storeURL: url, store: store, env: env("deltabus_relay"),
		args: []string{"--batch-max-delay", "20ms", "--shutdown-timeout", "5s"}, addrs: map[*relayProc]string{},
		prodDSN: asRole(db, "app_producer")}
	p := s.relay()
	waitSlotActive(t, db.DSN, "deltabus", p)
	s.produce(3000, 300)
	eventually(t, time.Minute, "events streamed", func() bool { return topicRows(t, s, topics[1]) > 50 })
	moveAway(t, url, topics[1]) // lost: restored by a rebuild as deltabus_relay
	eventually(t, time.Minute, topics[1]+" held", func() bool {
		st := heldState(ctx, store, topics[1])
		return st.Paused != ""
	})
	if code, out, errOut := runCLI(t, env("deltabus_relay"), "rebuild", "--topic", topics[1]); code != 0 {
		t.Fatalf("rebuild as deltabus_relay: exit %d\n%s%s\n%s", code, out, errOut, p.tail())
	}
	<-s.produced
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	if code, out, errOut := runCLI(t, env("deltabus_reconcile"), "reconcile", "--last", "10m", "--window", "1s", "--lateness", "1ms", "--no-record"); code != 0 {
		t.Fatalf("reconcile as deltabus_reconcile: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, env("deltabus_janitor"), "janitor", "--retention", "1ms")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("janitor as deltabus_janitor: exit %d\n%s%s", code, out, errOut)
	}
	s.stopWithin(p, 30*time.Second)
	var left int
	if err := pgxQueryRow(t, db.DSN, "SELECT count(*) FROM outbox", &left); err != nil || left != 0 {
		t.Fatalf("the janitor left %d outbox rows (%v)", left, err)
	}
	rows := truth.read(t)
	if len(rows) != 3600 {
		t.Fatalf("truth saw %d rows, producers wrote 3600", len(rows))
	}
	checkAfterRebuild(t, store, rows, topics[1])
}

func pgxQueryRow(t testing.TB, dsn, sql string, dest ...any) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// TestPreflightBeforeSlot: a relay role without SELECT on the outbox, and a
// store the relay cannot write, each fail with one line naming the fix
// before the replication slot is created (not in a crash loop after it).
func TestPreflightBeforeSlot(t *testing.T) {
	db := setup(t)
	db.Exec(t, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'relay_no_select') THEN CREATE ROLE relay_no_select LOGIN REPLICATION; END IF;
	END $$`)
	readOnly := readOnlyDir(t)
	url, _ := localStore(t)
	for _, c := range []struct {
		name, source, store string
		want                []string
	}{
		{"no SELECT on the outbox", asRole(db, "relay_no_select"), url, []string{"cannot read table public.outbox", "GRANT SELECT"}},
		{"read-only store", db.DSN, "file://" + readOnly, []string{"not writable", "read-only file system"}},
	} {
		code, _, stderr := runCLI(t, []string{"DELTABUS_SOURCE=" + c.source, "DELTABUS_STORE=" + c.store}, "run", "--metrics-addr", "")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code == 0 || !strings.HasPrefix(last, "relay: ") {
			t.Errorf("%s: exit %d, last line %q", c.name, code, last)
		}
		for _, w := range c.want {
			if !strings.Contains(last, w) {
				t.Errorf("%s: %q does not say %q", c.name, last, w)
			}
		}
		var slots int
		if err := pgxQueryRow(t, db.DSN, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'deltabus'", &slots); err != nil || slots != 0 {
			t.Errorf("%s: a slot was created before the preflight failed (%d, %v)", c.name, slots, err)
		}
	}
}

// TestPreflightOrder: the preflight's store checks run beside its database
// checks, yet a start is refused for the first failing check in the
// documented order (the publication before the store), and a refused start
// leaves a writable store as it found it: empty.
func TestPreflightOrder(t *testing.T) {
	db := setup(t)
	readOnly := readOnlyDir(t)
	empty := t.TempDir()
	for _, store := range []string{"file://" + readOnly, "file://" + empty} {
		code, _, stderr := runCLI(t, []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + store, "DELTABUS_PUBLICATION=missing_pub"},
			"run", "--metrics-addr", "")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code == 0 || !strings.Contains(last, "publication missing_pub does not exist") || strings.Contains(last, "writable") {
			t.Errorf("store %s, no such publication: exit %d, last line %q; want the publication named", store, code, last)
		}
	}
	entries, err := os.ReadDir(empty)
	if err != nil || len(entries) != 0 {
		t.Errorf("a start refused for its publication wrote to the store: %v, %v", entries, err)
	}
}
