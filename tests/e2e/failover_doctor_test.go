package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestDoctorChecksFailover: relay doctor, given an HA DSN as the relay's
// least-privileged role, says what a promotion would do. On PostgreSQL 17
// and later with a synchronising standby it fails while the primary lets
// the relay run ahead of the standby (no synchronized_standby_slots) and
// holds once it does not; on an older major it says a promotion means a
// recovery.
func TestDoctorChecksFailover(t *testing.T) {
	ha := newHACluster(t, failoverSlotMajors(t)[0], true)
	primary := &pgtest.DB{Name: "postgres", DSN: ha.primary.DSN("postgres")}
	applyRoles(t, primary, "app_producer")
	primary.Exec(t, "ALTER SYSTEM RESET synchronized_standby_slots")
	primary.Exec(t, "ALTER SYSTEM SET max_slot_wal_keep_size = '1GB'")
	primary.Exec(t, "SELECT pg_reload_conf()")
	url, _ := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + asRole(&pgtest.DB{DSN: ha.dsn}, "deltabus_relay"), "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	waitSlotActive(t, primary.DSN, "deltabus", p)
	primary.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'k', 'Created', '{}')`)
	waitSynced(t, ha.standby.DSN("postgres"), "deltabus")

	_, lines, _ := runDoctor(t, env)
	wantFail(t, lines, "failover", "synchronized_standby_slots is empty", "standby1")
	primary.Exec(t, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
	primary.Exec(t, "SELECT pg_reload_conf()")
	code, lines, _ := runDoctor(t, env)
	if got := strings.Join(lines["failover"], ""); code != 0 || !strings.Contains(got, "resumes by itself") {
		t.Fatalf("doctor with a failover slot and synchronized_standby_slots: exit %d, failover %q", code, got)
	}
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}

	old := newHACluster(t, 15, false)
	oldPrimary := &pgtest.DB{Name: "postgres", DSN: old.primary.DSN("postgres")}
	applyRoles(t, oldPrimary, "app_producer")
	env = []string{"DELTABUS_SOURCE=" + asRole(&pgtest.DB{DSN: old.dsn}, "deltabus_relay"), "DELTABUS_STORE=" + url}
	_, lines, _ = runDoctor(t, env)
	if got := strings.Join(lines["failover"], ""); !strings.Contains(got, "ok") || !strings.Contains(got, "relay bootstrap --recover") {
		t.Fatalf("doctor on PostgreSQL 15 with a standby: failover %q", got)
	}
}
