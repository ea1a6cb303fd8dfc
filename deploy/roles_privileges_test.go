package deploy

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/reconcile"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestRolesLeastPrivilege creates the roles as the compose file does (the
// init script, roles.sql, the demo secrets) on a PostgreSQL 15 that checks
// passwords, then runs each role's own work with the relay's code (migrate,
// preflight, replication slot, janitor) and checks what each role is
// refused.
func TestRolesLeastPrivilege(t *testing.T) {
	srv := scramServer(t)
	if out := runInitScript(t, srv); strings.Contains(out, "WARNING") {
		t.Fatalf("init script warned on a new database:\n%s", out)
	}
	admin := adminConn(t, srv, "app")
	checkRoleAttributes(t, admin)
	// The application's own table, which no DeltaBus role may read.
	mustExec(t, admin, "CREATE TABLE orders (id int PRIMARY KEY, total numeric)")
	mustExec(t, admin, "CREATE ROLE app_writer LOGIN PASSWORD 'app-writer-pw'")

	migrateOutboxes(t, srv)
	// A second run, now naming the producer: idempotent, and it grants INSERT
	// on the outbox tables that exist (and, by default privileges, later ones).
	if out, err := psqlRoles(srv, "postgres", nil, "producer_role=app_writer"); err != nil || strings.Contains(out, "WARNING") {
		t.Fatalf("second run of roles.sql: %v\n%s", err, out)
	}
	produceEvents(t, srv)
	checkRelayRole(t, srv)
	checkJanitorRole(t, srv, admin)
	checkReconcileRole(t, srv)
	checkPasswordsEnforced(t, srv)
	checkKeyTables(t, admin, connectAs(t, srv, "deltabus_migrate"), func() {
		if out, err := psqlRoles(srv, "postgres", nil, "producer_role=app_writer"); err != nil || strings.Contains(out, "WARNING") {
			t.Fatalf("run of roles.sql with the key tables: %v\n%s", err, out)
		}
	})
	checkExistingOutbox(t, srv)
}

func checkRoleAttributes(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	rows, err := admin.Query(testCtx(t), `SELECT rolname, rolcanlogin, rolreplication,
		rolsuper OR rolcreatedb OR rolcreaterole OR rolbypassrls, rolpassword LIKE 'SCRAM-SHA-256$%'
		FROM pg_authid WHERE rolname LIKE 'deltabus\_%' AND rolname NOT IN ('deltabus_keyreader', 'deltabus_eraser') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type attrs struct{ login, replication, powerful, scram bool }
	got := map[string]attrs{}
	for rows.Next() {
		var name string
		var a attrs
		if err := rows.Scan(&name, &a.login, &a.replication, &a.powerful, &a.scram); err != nil {
			t.Fatal(err)
		}
		got[name] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(roleSecrets) {
		t.Fatalf("roles: got %v, want %d deltabus_* roles", got, len(roleSecrets))
	}
	for name := range roleSecrets {
		want := attrs{login: true, replication: name == "deltabus_relay", scram: true}
		if got[name] != want {
			t.Errorf("role %s: got %+v, want %+v", name, got[name], want)
		}
	}
}

// migrateOutboxes runs relay migrate's code as deltabus_migrate: the
// outbox in public, then a second one in a schema it creates.
func migrateOutboxes(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	ctx := testCtx(t)
	mig := connectAs(t, srv, "deltabus_migrate")
	for _, o := range []migrations.Options{{}, {Schema: "billing"}} {
		rep, err := migrations.Apply(ctx, mig, o)
		if err != nil || !rep.Changed() {
			t.Fatalf("relay migrate %+v as deltabus_migrate: changed %v, %v", o, rep.Changed(), err)
		}
	}
	var owners string
	err := mig.QueryRow(ctx, `SELECT string_agg(DISTINCT pg_get_userbyid(relowner), ',')
		FROM pg_class WHERE oid IN ('public.outbox'::regclass, 'billing.outbox'::regclass)`).Scan(&owners)
	if err != nil || owners != "deltabus_migrate" {
		t.Fatalf("outbox owners %q (%v); want deltabus_migrate", owners, err)
	}
	mustDeny(t, mig, "SELECT * FROM orders")
}

// produceEvents inserts, as the producer role, two old and one new event
// into each outbox; the producer may not read or delete them.
func produceEvents(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	t.Setenv("PGPASSFILE", "/nonexistent")
	t.Setenv("PGPASSWORD", "app-writer-pw")
	conn, err := pgx.Connect(testCtx(t), roleDSN(srv, "app_writer", false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, table := range []string{"public.outbox", "billing.outbox"} {
		mustExec(t, conn, `INSERT INTO `+table+` (topic, key, type, payload, occurred_at) VALUES
			('orders', 'o1', 'Created', '{}', now() - interval '10 days'),
			('orders', 'o2', 'Created', '{}', now() - interval '9 days'),
			('orders', 'o3', 'Created', '{}', now())`)
		mustDeny(t, conn, "SELECT * FROM "+table)
		mustDeny(t, conn, "DELETE FROM "+table)
	}
}

func checkRelayRole(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	ctx := testCtx(t)
	rel := connectAs(t, srv, "deltabus_relay")
	var n int
	if err := rel.QueryRow(ctx, "SELECT (SELECT count(*) FROM public.outbox) + (SELECT count(*) FROM billing.outbox)").Scan(&n); err != nil || n != 6 {
		t.Fatalf("deltabus_relay reads the outboxes: %d rows, %v; want 6", n, err)
	}
	if err := migrations.Check(ctx, rel, migrations.Options{}); err != nil {
		t.Fatalf("relay preflight as deltabus_relay: %v", err)
	}
	// relay rebuild writes its watermark into the stream.
	mustExec(t, rel, "SELECT pg_logical_emit_message(true, 'deltabus-roles-test', 'x')")
	for _, sql := range []string{"DELETE FROM outbox", "UPDATE outbox SET key = 'x'", "TRUNCATE outbox",
		"INSERT INTO outbox (topic, key, type, payload) VALUES ('t', 'k', 'T', '{}')",
		"SELECT * FROM orders", "CREATE TABLE public.relay_table (id int)", "DROP PUBLICATION deltabus"} {
		mustDeny(t, rel, sql)
	}
	// The slot, created on a replication connection as relay run does.
	repl, err := pgconn.Connect(ctx, roleDSN(srv, "deltabus_relay", true))
	if err != nil {
		t.Fatalf("replication connection as deltabus_relay: %v", err)
	}
	defer repl.Close(context.Background())
	if _, err := pglogrepl.CreateReplicationSlot(ctx, repl, "deltabus", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatalf("create slot as deltabus_relay: %v", err)
	}
}

// checkJanitorRole runs relay janitor's code as deltabus_janitor while the
// slot confirms the WAL (as a streaming relay would): it deletes the old
// rows of both outboxes and nothing else.
func checkJanitorRole(t *testing.T, srv *pgtest.Server, admin *pgx.Conn) {
	t.Helper()
	ctx := testCtx(t)
	t.Setenv("PGPASSFILE", roleSecrets["deltabus_janitor"])
	t.Setenv("PGPASSWORD", "")
	done := make(chan struct{})
	advanced := make(chan error, 1)
	go func() { advanced <- confirmWAL(ctx, srv, done) }()
	rep, err := reconcile.RunJanitor(ctx, roleDSN(srv, "deltabus_janitor", false),
		reconcile.JanitorOptions{Retention: 168 * time.Hour, DurableWait: time.Minute}, nil)
	close(done)
	if aerr := <-advanced; aerr != nil {
		t.Fatalf("advance the slot: %v", aerr)
	}
	if err != nil {
		t.Fatalf("relay janitor as deltabus_janitor: %v", err)
	}
	if rep.Deleted["public.outbox"] != 2 || rep.Deleted["billing.outbox"] != 2 {
		t.Fatalf("janitor deleted %v; want 2 old rows of each outbox", rep.Deleted)
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM public.outbox) + (SELECT count(*) FROM billing.outbox)").Scan(&left); err != nil || left != 2 {
		t.Fatalf("rows left after the janitor: %d (%v); want the 2 new ones", left, err)
	}
	jan := connectAs(t, srv, "deltabus_janitor")
	for _, sql := range []string{"UPDATE outbox SET key = 'x'", "TRUNCATE outbox",
		"INSERT INTO outbox (topic, key, type, payload) VALUES ('t', 'k', 'T', '{}')", "SELECT * FROM orders", "DELETE FROM orders"} {
		mustDeny(t, jan, sql)
	}
	t.Setenv("PGPASSFILE", roleSecrets["deltabus_janitor"])
	if _, err := pgconn.Connect(ctx, roleDSN(srv, "deltabus_janitor", true)); !isDenied(err) {
		t.Fatalf("replication connection as deltabus_janitor: got %v, want permission denied", err)
	}
}

// confirmWAL plays the relay's acknowledgements: it moves the slot to the
// flushed WAL position until done closes.
func confirmWAL(ctx context.Context, srv *pgtest.Server, done <-chan struct{}) error {
	conn, err := pgx.Connect(ctx, srv.DSN("app"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		if _, err := conn.Exec(ctx, "SELECT pg_replication_slot_advance('deltabus', pg_current_wal_flush_lsn())"); err != nil {
			return err
		}
		select {
		case <-done:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func checkReconcileRole(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	ctx := testCtx(t)
	rec := connectAs(t, srv, "deltabus_reconcile")
	var n int
	if err := rec.QueryRow(ctx, "SELECT (SELECT count(*) FROM public.outbox) + (SELECT count(*) FROM billing.outbox)").Scan(&n); err != nil {
		t.Fatalf("deltabus_reconcile reads the outboxes: %v", err)
	}
	// reconcile flushes the WAL with a transaction that takes an xid.
	if err := pgx.BeginFunc(ctx, rec, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_current_xact_id()")
		return err
	}); err != nil {
		t.Fatalf("deltabus_reconcile takes an xid: %v", err)
	}
	for _, sql := range []string{"DELETE FROM outbox", "UPDATE outbox SET key = 'x'",
		"INSERT INTO outbox (topic, key, type, payload) VALUES ('t', 'k', 'T', '{}')", "SELECT * FROM orders"} {
		mustDeny(t, rec, sql)
	}
}

// checkPasswordsEnforced: the server really checks the passwords the roles
// were given, and roles.sql refuses to run as anything but a superuser.
func checkPasswordsEnforced(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	ctx := testCtx(t)
	t.Setenv("PGPASSFILE", "/nonexistent")
	t.Setenv("PGPASSWORD", "wrong")
	_, err := pgx.Connect(ctx, roleDSN(srv, "deltabus_relay", false))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("deltabus_relay with a wrong password: got %v, want invalid_password (28P01)", err)
	}
	pw := pgpassPassword(t, roleSecrets["deltabus_migrate"])
	out, err := psqlRoles(srv, "deltabus_migrate", []string{"PGPASSWORD=" + pw})
	if err == nil || !strings.Contains(out, "roles.sql must run as a superuser") {
		t.Fatalf("roles.sql as deltabus_migrate: %v\n%s\nwant a failure naming the superuser requirement", err, out)
	}
}

// pgpassPassword returns the password field of a one-line pgpass file.
func pgpassPassword(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.SplitN(strings.TrimSpace(string(b)), ":", 5)
	if len(f) != 5 {
		t.Fatalf("%s: want host:port:db:user:password", path)
	}
	return f[4]
}

func isDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// checkExistingOutbox: in a database whose outbox (in its own schema)
// exists already and belongs to another role, roles.sql grants the relay,
// janitor and reconciler roles their access to it and warns, with the fix,
// that deltabus_migrate cannot migrate it.
func checkExistingOutbox(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	admin := adminConn(t, srv, "postgres")
	mustExec(t, admin, "CREATE DATABASE legacy")
	legacy := adminConn(t, srv, "legacy")
	mustExec(t, legacy, "CREATE SCHEMA events")
	mustExec(t, legacy, "CREATE TABLE events.outbox (id uuid PRIMARY KEY, topic text NOT NULL, key text NOT NULL, type text NOT NULL, payload jsonb NOT NULL)")
	out, err := psqlRolesIn(srv, "legacy", "postgres", nil, "outbox_schema=events")
	if err != nil || !strings.Contains(out, "table events.outbox is owned by postgres") ||
		!strings.Contains(out, "ALTER TABLE events.outbox OWNER TO deltabus_migrate") {
		t.Fatalf("roles.sql on an outbox owned by postgres: %v\n%s\nwant a warning with the ALTER TABLE fix", err, out)
	}
	var grants string
	err = legacy.QueryRow(testCtx(t), `SELECT string_agg(grantee || ':' || privilege_type, ',' ORDER BY grantee, privilege_type)
		FROM information_schema.role_table_grants
		WHERE table_schema = 'events' AND table_name = 'outbox' AND grantee LIKE 'deltabus%'`).Scan(&grants)
	want := "deltabus_eraser:DELETE,deltabus_eraser:SELECT,deltabus_janitor:DELETE,deltabus_janitor:SELECT,deltabus_reconcile:SELECT,deltabus_relay:SELECT"
	if err != nil || grants != want {
		t.Fatalf("grants on events.outbox: %q (%v); want %q", grants, err, want)
	}
}
