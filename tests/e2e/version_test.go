package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestUnsupportedPostgreSQLRefused: on a real PostgreSQL 13, whose
// pgoutput cannot stream the logical messages the relay relies on, every
// command that sets up, checks or starts a relay refuses with one line
// naming the version, the minimum and the fix, exits non-zero and writes
// nothing: migrate creates no outbox, run and bootstrap create no slot and
// leave the store empty, doctor fails its server_version check.
func TestUnsupportedPostgreSQLRefused(t *testing.T) {
	srv := pgtest.NewServerVersion(t, 13)
	dsn := srv.DSN("postgres")
	dir := t.TempDir()
	env := []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=file://" + dir}
	want := []string{"PostgreSQL 13.", "not supported", "14 or later", "upgrade the database server"}

	refused := func(t *testing.T, args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, env, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code == 0 || len(lines) != 1 {
			t.Fatalf("relay %s on PostgreSQL 13: exit %d, want non-zero and one line on stderr\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		for _, w := range want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("relay %s: %q does not say %q", strings.Join(args, " "), lines[0], w)
			}
		}
		var slots int
		if err := pgxQueryRow(t, dsn, `SELECT count(*) FROM pg_replication_slots`, &slots); err != nil || slots != 0 {
			t.Errorf("relay %s left %d replication slots behind (%v)", strings.Join(args, " "), slots, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("relay %s wrote %s to the store", strings.Join(args, " "), entries[0].Name())
		}
	}

	t.Run("migrate", func(t *testing.T) {
		refused(t, "migrate")
		var objects int
		err := pgxQueryRow(t, dsn, `SELECT (SELECT count(*) FROM pg_class WHERE relname = 'outbox')
			+ (SELECT count(*) FROM pg_publication)`, &objects)
		if err != nil || objects != 0 {
			t.Fatalf("relay migrate refused but created the outbox table or its publication (%d, %v)", objects, err)
		}
	})
	// The outbox, made by hand as on a server the relay once accepted: the
	// commands below have everything they need but a supported server.
	db := &pgtest.DB{Name: "postgres", DSN: dsn}
	db.Exec(t, `CREATE TABLE outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), topic text NOT NULL,
		key text NOT NULL, type text NOT NULL, schema_version int NOT NULL DEFAULT 1, payload jsonb NOT NULL,
		headers jsonb, occurred_at timestamptz NOT NULL DEFAULT now())`)
	db.Exec(t, `CREATE PUBLICATION deltabus FOR TABLE outbox`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'k1', 'Created', '{}')`)
	for _, args := range [][]string{{"run", "--metrics-addr", ""}, {"bootstrap"}, {"bootstrap", "--recover"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) { refused(t, args...) })
	}
	t.Run("doctor", func(t *testing.T) {
		code, lines, rep := runDoctor(t, env)
		if code == 0 || rep.OK {
			t.Fatalf("relay doctor on PostgreSQL 13: exit %d, ok=%v", code, rep.OK)
		}
		wantFail(t, lines, "server_version", want...)
	})
}
