package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/doctor"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

// runDoctor runs `relay doctor` and `relay doctor --json` and returns the
// exit code, the text lines by check and the JSON report.
func runDoctor(t *testing.T, env []string) (int, map[string][]string, doctor.Report) {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, "doctor")
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		tag, rest, _ := strings.Cut(l, " ")
		check, _, found := strings.Cut(strings.TrimSpace(rest), ": ")
		if !found || (tag != "ok" && tag != "FAIL" && tag != "skip") {
			continue
		}
		lines[check] = append(lines[check], l)
	}
	jcode, jout, _ := runCLI(t, env, "doctor", "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(jout), &rep); err != nil {
		t.Fatalf("relay doctor --json: %v\n%s", err, jout)
	}
	if jcode != code || rep.OK != (code == 0) {
		t.Fatalf("relay doctor exit %d, --json exit %d with ok=%v", code, jcode, rep.OK)
	}
	t.Logf("relay doctor: exit %d\n%s%s", code, stdout, stderr)
	return code, lines, rep
}

// wantFail checks that check failed with a line holding every want.
func wantFail(t *testing.T, lines map[string][]string, check string, want ...string) {
	t.Helper()
	for _, l := range lines[check] {
		if !strings.HasPrefix(l, "FAIL ") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("no FAIL line for %s saying %q: %q", check, want, lines[check])
}

// doctorServer is a private cluster that meets every precondition but
// what extra changes, with the outbox and roles.sql's roles in place.
func doctorServer(t *testing.T, extra ...string) *pgtest.DB {
	srv := pgtest.NewServer(t, append([]string{"max_slot_wal_keep_size = 1GB"}, extra...)...)
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
	applyRoles(t, db, "app_producer")
	if code, out, errOut := runCLI(t, []string{"DELTABUS_SOURCE=" + asRole(db, "deltabus_migrate")}, "migrate"); code != 0 {
		t.Fatalf("relay migrate: exit %d\n%s%s", code, out, errOut)
	}
	return db
}

// TestDoctorAllHold: on a database set up as the README says (roles.sql,
// relay migrate, a WAL limit) every check holds, before the first start
// and while a relay streams, and doctor leaves no slot behind.
func TestDoctorAllHold(t *testing.T) {
	db := doctorServer(t)
	url, _ := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + asRole(db, "deltabus_relay"), "DELTABUS_STORE=" + url}
	code, lines, rep := runDoctor(t, env)
	if code != 0 || !rep.OK {
		t.Fatalf("doctor on a ready database: exit %d, %v", code, lines)
	}
	for _, c := range rep.Checks {
		if c.Status != doctor.OK {
			t.Errorf("%s: %s %s", c.Check, c.Status, c.Detail)
		}
	}
	if want := "does not exist yet"; !strings.Contains(strings.Join(lines["slot"], ""), want) {
		t.Errorf("slot before the first start: %q, want %q", lines["slot"], want)
	}
	var slots int
	if err := pgxQueryRow(t, db.DSN, "SELECT count(*) FROM pg_replication_slots", &slots); err != nil || slots != 0 {
		t.Fatalf("doctor left %d slots (%v)", slots, err)
	}
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	code, lines, _ = runDoctor(t, env)
	if code != 0 || !strings.Contains(strings.Join(lines["slot"], ""), "streamed by pid") {
		t.Fatalf("doctor while the relay streams: exit %d, slot %q", code, lines["slot"])
	}
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorWrongWALLevel: wal_level = replica fails with the fix, and the
// checks that do not need it still run and hold.
func TestDoctorWrongWALLevel(t *testing.T) {
	db := doctorServer(t, "wal_level = replica")
	url, _ := localStore(t)
	code, lines, _ := runDoctor(t, []string{"DELTABUS_SOURCE=" + asRole(db, "deltabus_relay"), "DELTABUS_STORE=" + url})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantFail(t, lines, "wal_level", `"replica"`, "wal_level = logical", "restart PostgreSQL")
	for _, check := range []string{"publication", "privileges", "store_writable", "conditional_write", "clock_skew"} {
		if l := lines[check]; len(l) != 1 || !strings.HasPrefix(l[0], "ok ") {
			t.Errorf("%s with wal_level = replica: %q, want ok", check, l)
		}
	}
}

// TestDoctorMissingPrivilege: a relay role without REPLICATION, and one
// without SELECT on the outbox, each fail naming the GRANT or ALTER ROLE;
// a janitor role without DELETE fails naming roles.sql.
func TestDoctorMissingPrivilege(t *testing.T) {
	db := setup(t)
	db.Exec(t, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'doctor_no_repl') THEN CREATE ROLE doctor_no_repl LOGIN; END IF;
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'doctor_no_select') THEN CREATE ROLE doctor_no_select LOGIN REPLICATION; END IF;
	END $$`)
	db.Exec(t, `GRANT SELECT ON public.outbox TO doctor_no_repl`)
	url, _ := localStore(t)
	code, lines, _ := runDoctor(t, []string{"DELTABUS_SOURCE=" + asRole(db, "doctor_no_repl"), "DELTABUS_STORE=" + url})
	if code != 1 {
		t.Fatalf("no REPLICATION: exit %d, want 1", code)
	}
	wantFail(t, lines, "privileges", "doctor_no_repl lacks REPLICATION", `ALTER ROLE "doctor_no_repl" REPLICATION`)
	code, lines, _ = runDoctor(t, []string{"DELTABUS_SOURCE=" + asRole(db, "doctor_no_select"), "DELTABUS_STORE=" + url})
	if code != 1 {
		t.Fatalf("no SELECT: exit %d, want 1", code)
	}
	wantFail(t, lines, "publication", "doctor_no_select cannot read table public.outbox", "GRANT SELECT")
	if l := lines["privileges"]; len(l) == 0 || strings.HasPrefix(l[0], "FAIL") {
		t.Errorf("a role with REPLICATION: privileges %q, want ok (the missing SELECT is the publication's)", l)
	}
}

// TestDoctorLostSlot: a slot PostgreSQL invalidated, and then a slot
// dropped under a store that holds the relay's events, each fail naming
// `relay bootstrap --recover`.
func TestDoctorLostSlot(t *testing.T) {
	r := relayedThenStopped(t)
	db, conn, env := r.db, r.conn, r.env
	if code, lines, _ := runDoctor(t, env); code != 0 {
		t.Fatalf("doctor before the slot is lost: exit %d %v", code, lines)
	}
	invalidateSlot(t, db, conn)
	code, lines, _ := runDoctor(t, env)
	if code != 1 {
		t.Fatalf("lost slot: exit %d, want 1", code)
	}
	wantFail(t, lines, "slot", "wal_status=lost", "relay bootstrap --recover")
	db.Exec(t, `SELECT pg_drop_replication_slot('deltabus')`)
	code, lines, _ = runDoctor(t, env)
	if code != 1 {
		t.Fatalf("dropped slot: exit %d, want 1", code)
	}
	wantFail(t, lines, "slot", "does not exist but store", "relay bootstrap --recover")
}

// TestDoctorReadOnlyStore: a store on a read-only file system fails the
// write probe with the fix; the conditional-write check, which needs a
// write, is skipped naming it.
func TestDoctorReadOnlyStore(t *testing.T) {
	db := setup(t)
	readOnly := readOnlyDir(t)
	code, lines, _ := runDoctor(t, []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + readOnly})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantFail(t, lines, "store_writable", "not writable", "read-only file system")
	if l := lines["conditional_write"]; len(l) != 1 || !strings.HasPrefix(l[0], "skip ") {
		t.Errorf("conditional_write on a read-only store: %q, want skipped", l)
	}
}

// TestDoctorConditionalWrites: on versitygw a second put-if-absent of one
// key is refused (ok); behind a proxy that answers every refused
// conditional PUT with 200, as a server that ignores If-None-Match does,
// the check fails.
func TestDoctorConditionalWrites(t *testing.T) {
	db := setup(t)
	b := s3test.NewBucket(t)
	target, err := url.Parse(b.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPut && resp.StatusCode == http.StatusPreconditionFailed {
			resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
			resp.Body = http.NoBody
			resp.ContentLength = 0
			resp.Header.Del("Content-Length")
		}
		return nil
	}
	ignoring := httptest.NewServer(proxy)
	defer ignoring.Close()
	env := append(s3Env(b, b.Endpoint), "DELTABUS_SOURCE="+db.DSN, "DELTABUS_STORE="+b.URL("doctor"))
	_, lines, _ := runDoctor(t, env)
	if l := lines["conditional_write"]; len(l) != 1 || !strings.HasPrefix(l[0], "ok ") {
		t.Errorf("conditional_write on versitygw: %q, want ok", l)
	}
	code, lines, _ := runDoctor(t, append(s3Env(b, ignoring.URL), "DELTABUS_SOURCE="+db.DSN, "DELTABUS_STORE="+b.URL("doctor")))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantFail(t, lines, "conditional_write", "accepted a second put-if-absent", "ignores conditional writes")
}

// TestDoctorPersonalData: with --pii-schemas marking personal data, doctor
// checks the KEK and the key table (issue 31): all hold before the first
// start (no root yet) and after it (the KEK opens the root); a missing KEK,
// another KEK, a role without the key table's privileges and a database
// without the key table each fail with the fix, and doctor creates no root.
func TestDoctorPersonalData(t *testing.T) {
	db := doctorServer(t)
	schemas := t.TempDir()
	os.MkdirAll(filepath.Join(schemas, "customers", "updated"), 0o755)
	os.WriteFile(filepath.Join(schemas, "customers", "updated", "1.json"), []byte(customerSchema), 0o644)
	kek, other := filepath.Join(t.TempDir(), "kek.json"), filepath.Join(t.TempDir(), "other.json")
	for _, f := range []string{kek, other} {
		if code, _, errOut := runCLI(t, nil, "keys", "init", "--kek-file", f); code != 0 {
			t.Fatal(errOut)
		}
	}
	if code, out, errOut := runCLI(t, []string{"DELTABUS_SOURCE=" + asRole(db, "deltabus_migrate")}, "migrate", "--key-tables"); code != 0 {
		t.Fatalf("relay migrate --key-tables: exit %d\n%s%s", code, out, errOut)
	}
	url, _ := localStore(t)
	base := []string{"DELTABUS_SOURCE=" + asRole(db, "deltabus_relay"), "DELTABUS_STORE=" + url, "DELTABUS_PII_SCHEMAS=" + schemas}
	env := append(base[:len(base):len(base)], "DELTABUS_KEK=file://"+kek)
	code, lines, rep := runDoctor(t, env)
	if code != 0 || !rep.OK || len(lines["kek"]) != 1 || !strings.Contains(strings.Join(lines["key_table"], ""), "no root key yet") {
		t.Fatalf("before the first start: exit %d, %v", code, lines)
	}
	var roots int
	if err := pgxQueryRow(t, db.DSN, "SELECT count(*) FROM deltabus.key_root", &roots); err != nil || roots != 0 {
		t.Fatalf("doctor made %d roots (%v)", roots, err)
	}
	_, lines, _ = runDoctor(t, base)
	wantFail(t, lines, "kek", "DELTABUS_KEK is not set", "relay keys init")
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if code, lines, _ = runDoctor(t, env); code != 0 || !strings.Contains(strings.Join(lines["key_table"], ""), "opens with DELTABUS_KEK") {
		t.Fatalf("after the first start: exit %d, %v", code, lines)
	}
	_, lines, _ = runDoctor(t, append(base[:len(base):len(base)], "DELTABUS_KEK=file://"+other))
	wantFail(t, lines, "key_table", "cannot decrypt the key table's root key", "set DELTABUS_KEK to that KEK")
	_, lines, _ = runDoctor(t, append(env[:len(env):len(env)], "DELTABUS_KEYS="+asRole(db, "deltabus_janitor")))
	wantFail(t, lines, "key_table", "may not SELECT from it", "roles.sql")
	bare := pgtest.NewDB(t)
	_, lines, _ = runDoctor(t, append(env[:len(env):len(env)], "DELTABUS_KEYS="+bare.DSN))
	wantFail(t, lines, "key_table", "missing", "run `relay migrate`")
}
