package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/verify"
)

// TestRunStopAtDrainsThenExits: `relay run --stop-at LSN` exits 0 by
// itself once every event written before LSN is in its topic and the slot
// confirmed LSN; events written after it stay in the slot for the next run.
func TestRunStopAtDrainsThenExits(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	ctx := context.Background()
	conn := db.Conn(t)
	insert := func(from, to int) {
		t.Helper()
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (topic, key, type, payload)
			SELECT 'orders', 'k' || g, 'Created', jsonb_build_object('n', g) FROM generate_series(%d, %d) g`, from, to))
	}
	lsn := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func() {
		t.Helper()
		at := lsn()
		_, errOut, code := runRelayCmd(t, env, "run", "--metrics-addr", "", "--stop-at", at)
		if code != 0 {
			t.Fatalf("relay run --stop-at %s: exit %d: %s", at, code, errOut)
		}
		if !strings.Contains(errOut, "reached --stop-at") {
			t.Errorf("no stop-at line in the log:\n%s", errOut)
		}
		var confirmed bool
		if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'deltabus'`,
			at).Scan(&confirmed); err != nil {
			t.Fatal(err)
		}
		if !confirmed {
			t.Fatalf("relay run --stop-at %s exited before the slot confirmed it", at)
		}
	}
	count := func(want int) {
		t.Helper()
		rows, err := verify.ReadTopic(ctx, store, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != want {
			t.Fatalf("orders has %d rows, want %d", len(rows), want)
		}
	}

	insert(1, 100) // before the slot: the first start's snapshot copies them
	run()
	count(100)
	insert(101, 1100)
	run() // streams them, then stops
	count(1100)
	insert(1101, 1200) // after the stop: read by the next run
	run()
	count(1200)
}

// TestRunStopAtRejectsABadLSN: a --stop-at that is not a WAL position is a
// usage error (exit 2) named on the first line, before anything connects
// or writes.
func TestRunStopAtRejectsABadLSN(t *testing.T) {
	dir := t.TempDir()
	env := []string{"DELTABUS_SOURCE=postgres://nobody@127.0.0.1:1/none", "DELTABUS_STORE=file://" + dir}
	for _, bad := range []string{"nonsense", "0/0", "16/"} {
		_, errOut, code := runRelayCmd(t, env, "run", "--metrics-addr", "", "--stop-at", bad)
		if code != 2 {
			t.Errorf("--stop-at %q: exit %d, want 2 (usage): %s", bad, code, errOut)
		}
		if first, _, _ := strings.Cut(errOut, "\n"); !strings.Contains(first, "is not a WAL position") {
			t.Errorf("--stop-at %q: first line %q does not say what is wrong", bad, first)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the store holds %d entries after rejected runs (%v), want none", len(entries), err)
	}
}
