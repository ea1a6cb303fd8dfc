package deploy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The roles roles.sql creates and the compose secret each one logs in with.
var roleSecrets = map[string]string{
	"deltabus_migrate":   "compose/secrets/migrate_pgpass",
	"deltabus_relay":     "compose/secrets/relay_pgpass",
	"deltabus_janitor":   "compose/secrets/janitor_pgpass",
	"deltabus_reconcile": "compose/secrets/reconcile_pgpass",
}

// pgBin returns the path of a PostgreSQL client program, as pgcluster finds
// the server's.
func pgBin(name string) string {
	dir := os.Getenv("DELTABUS_PG_BIN")
	if dir == "" {
		dir = pgcluster.BinDir
	}
	return filepath.Join(dir, name)
}

// scramServer starts a private PostgreSQL 15 where every role but the
// superuser must give its password (SCRAM), as in the postgres image, and
// creates the database "app".
func scramServer(t *testing.T) *pgtest.Server {
	t.Helper()
	return scramServerDB(t, "app")
}

// scramServerDB is scramServer with the database db.
func scramServerDB(t *testing.T, db string) *pgtest.Server {
	t.Helper()
	srv := pgtest.NewServer(t)
	hba := "local all all trust\n" +
		"host all postgres 127.0.0.1/32 trust\n" +
		"host all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(srv.DataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := adminConn(t, srv, "postgres")
	ctx := testCtx(t)
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return srv
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func adminConn(t *testing.T, srv *pgtest.Server, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), srv.DSN(db))
	if err != nil {
		t.Fatalf("connect as postgres: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// roleDSN is the DSN a deployment gives a role: no password in it; the
// password comes from PGPASSFILE or PGPASSWORD.
func roleDSN(srv *pgtest.Server, role string, replication bool) string {
	dsn := "postgres://" + role + "@127.0.0.1:" + strconv.Itoa(srv.Port) + "/app?sslmode=disable"
	if replication {
		dsn += "&replication=database"
	}
	return dsn
}

// connectAs connects as role the way the relay does: the DSN has no
// password, pgx reads it from the pgpass file named by PGPASSFILE.
func connectAs(t *testing.T, srv *pgtest.Server, role string) *pgx.Conn {
	t.Helper()
	t.Setenv("PGPASSFILE", roleSecrets[role])
	t.Setenv("PGPASSWORD", "") // pgx ignores an empty PGPASSWORD
	conn, err := pgx.Connect(testCtx(t), roleDSN(srv, role, false))
	if err != nil {
		t.Fatalf("connect as %s with PGPASSFILE=%s: %v", role, roleSecrets[role], err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// runInitScript runs the compose init script (what the postgres image runs
// on a new volume) against srv, with the repository's compose secrets.
func runInitScript(t *testing.T, srv *pgtest.Server) string {
	t.Helper()
	return runInitScriptDB(t, srv, "app")
}

// runInitScriptDB is runInitScript with POSTGRES_DB=db.
func runInitScriptDB(t *testing.T, srv *pgtest.Server, db string) string {
	t.Helper()
	cmd := exec.Command("sh", "compose/initdb/10-deltabus-roles.sh")
	cmd.Env = append(cleanEnv(),
		"PATH="+filepath.Dir(pgBin("psql"))+":"+os.Getenv("PATH"),
		"PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(srv.Port),
		"POSTGRES_USER=postgres", "POSTGRES_DB="+db,
		"DELTABUS_SECRETS_DIR=compose/secrets", "DELTABUS_ROLES_SQL=sql/roles.sql")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("compose/initdb/10-deltabus-roles.sh: %v\n%s", err, out)
	}
	return string(out)
}

// psqlRoles runs sql/roles.sql with psql as user, with extra -v variables
// and environment.
func psqlRoles(srv *pgtest.Server, user string, env []string, vars ...string) (string, error) {
	return psqlRolesIn(srv, "app", user, env, vars...)
}

// psqlRolesIn is psqlRoles connected to database db.
func psqlRolesIn(srv *pgtest.Server, db, user string, env []string, vars ...string) (string, error) {
	args := []string{"-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port), "-U", user, "-d", db, "-f", "sql/roles.sql"}
	for _, v := range vars {
		args = append(args, "-v", v)
	}
	cmd := exec.Command(pgBin("psql"), args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustExec runs sql and fails the test on error.
func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s as %s: %v", sql, conn.Config().User, err)
	}
}

// mustDeny runs sql and fails the test unless PostgreSQL refuses it for
// lack of privilege (SQLSTATE 42501).
func mustDeny(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	ctx := testCtx(t)
	_, err := conn.Exec(ctx, sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("%s as %s: got %v, want permission denied (42501)", sql, conn.Config().User, err)
	}
}

// cleanEnv is the environment without the libpq variables tests set.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "DELTABUS_") {
			env = append(env, kv)
		}
	}
	return env
}
