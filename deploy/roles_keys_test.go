package deploy

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
)

// checkKeyTables creates the key tables of personal data as relay migrate
// does (as deltabus_migrate) and checks each role's privileges on them:
// the relay reads and inserts keys, a key reader only reads, an eraser
// reads and deletes subject keys and deletes outbox rows, and the janitor
// and reconciler, whose default privileges cover every table
// deltabus_migrate creates, get nothing. A re-run of roles.sql keeps it so.
func checkKeyTables(t *testing.T, admin *pgx.Conn, mig *pgx.Conn, rerun func()) {
	t.Helper()
	if rep, err := migrations.ApplyKeys(testCtx(t), mig); err != nil || !rep.Changed() {
		t.Fatalf("relay migrate --key-tables as deltabus_migrate: %v %v", rep, err)
	}
	check := func() {
		as := func(role string, allow bool, sql string) {
			t.Helper()
			mustExec(t, admin, "SET ROLE "+role)
			defer mustExec(t, admin, "RESET ROLE")
			if allow {
				mustExec(t, admin, sql)
			} else {
				mustDeny(t, admin, sql)
			}
		}
		sel := "SELECT count(*) FROM deltabus.subject_keys"
		ins := "INSERT INTO deltabus.subject_keys (subject, topic, wrapped) VALUES ('\\x00112233445566778899aabbccddeeff', 't', '\\x00') ON CONFLICT DO NOTHING"
		del := "DELETE FROM deltabus.subject_keys WHERE topic = 'none'"
		root := "SELECT count(*) FROM deltabus.key_root"
		as("deltabus_relay", true, sel)
		as("deltabus_relay", true, root)
		as("deltabus_relay", true, ins)
		as("deltabus_relay", false, del)
		as("deltabus_keyreader", true, sel)
		as("deltabus_keyreader", true, root)
		as("deltabus_keyreader", false, ins)
		as("deltabus_eraser", true, del)
		as("deltabus_eraser", true, root)
		as("deltabus_eraser", false, ins)
		as("deltabus_eraser", false, "DELETE FROM deltabus.key_root")
		as("deltabus_eraser", true, "DELETE FROM public.outbox WHERE false")
		erased := "INSERT INTO deltabus.erased_subjects (subject, topic, erased_at) VALUES ('\\x00112233445566778899aabbccddeeff', 't', now()) ON CONFLICT (subject, topic) DO UPDATE SET erased_at = EXCLUDED.erased_at"
		as("deltabus_eraser", true, erased)
		as("deltabus_relay", true, "SELECT count(*) FROM deltabus.erased_subjects")
		as("deltabus_relay", false, erased)
		as("deltabus_keyreader", false, "SELECT count(*) FROM deltabus.erased_subjects")
		as("deltabus_keyreader", false, "SELECT count(*) FROM public.outbox")
		for _, r := range []string{"deltabus_janitor", "deltabus_reconcile"} {
			as(r, false, sel)
			as(r, false, root)
			as(r, false, del)
			as(r, false, "SELECT count(*) FROM deltabus.erased_subjects")
		}
	}
	check()
	rerun()
	check()
	var login bool
	if err := admin.QueryRow(testCtx(t), "SELECT bool_or(rolcanlogin OR rolsuper OR rolreplication) FROM pg_roles WHERE rolname IN ('deltabus_keyreader', 'deltabus_eraser')").Scan(&login); err != nil || login {
		t.Fatalf("the key groups can log in or are powerful: %v %v", login, err)
	}
}
