package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// TestInvalidatedSlotRefusesAndRecovers: PostgreSQL invalidates the slot
// through max_slot_wal_keep_size while the relay is down and events keep
// arriving. `relay run` must refuse (no silent restart from "now") and name
// the recovery; `relay bootstrap --recover` then brings every row the
// outbox holds into the topics exactly once, and streaming resumes.
func TestInvalidatedSlotRefusesAndRecovers(t *testing.T) {
	r := relayedThenStopped(t)
	db, conn, env, store := r.db, r.conn, r.env, r.store

	invalidateSlot(t, db, conn)

	code, _, stderr := runCLI(t, env, "run", "--metrics-addr", "")
	if code == 0 || !strings.Contains(stderr, "relay bootstrap --recover") {
		t.Fatalf("relay run on a lost slot: exit %d, stderr %q; want a refusal naming `relay bootstrap --recover`", code, stderr)
	}
	code, stdout, stderr := runCLI(t, env, "bootstrap", "--recover")
	if code != 0 {
		t.Fatalf("bootstrap --recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'payments', 'k' || g, 'Paid', '{}' FROM generate_series(1, 50) g`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v", err)
	}
	rep, err := verify.Compare(context.Background(), conn, "public.outbox", store)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("log differs from the outbox after recovery:\n%s", strings.Join(rep.Problems, "\n"))
	}
}

// invalidateSlot writes WAL past max_slot_wal_keep_size while the slot is

// stoppedRelay is a cluster that keeps at most 32 MB of WAL for a slot, a
// relay's store holding its first 100 events, and the relay stopped: the
// start of every lost-slot test.
type stoppedRelay struct {
	db    *pgtest.DB
	conn  *pgx.Conn
	env   []string
	store storage.Store
}

func relayedThenStopped(t *testing.T) stoppedRelay {
	t.Helper()
	srv := pgtest.NewServer(t, "max_slot_wal_keep_size = 32MB", "min_wal_size = 32MB", "max_wal_size = 64MB")
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
	conn := db.Conn(t)
	migrate(t, conn)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	waitSlotActive(t, dsn, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'k' || g, 'Created', '{}' FROM generate_series(1, 100) g`)
	waitDrained(t, dsn, "deltabus", time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v", err)
	}
	return stoppedRelay{db: db, conn: conn, env: env, store: store}
}

// idle, with outbox rows among it, until PostgreSQL marks the slot lost.
func invalidateSlot(t testing.TB, db *pgtest.DB, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		db.Exec(t, `INSERT INTO outbox (topic, key, type, payload)
			SELECT 'orders', 'gap' || g, 'Created', jsonb_build_object('pad', repeat(md5(g::text), 40)) FROM generate_series(1, 5000) g`)
		db.Exec(t, `SELECT pg_switch_wal()`)
		db.Exec(t, `CHECKPOINT`)
		var status string
		if err := conn.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = 'deltabus'`).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status == "lost" {
			t.Logf("slot invalidated after %d rounds", round+1)
			return
		}
	}
	t.Fatal("PostgreSQL never invalidated the slot")
}

// TestUnfinishedRecoveryIsRefused: a `relay bootstrap --recover` that died
// after marking the marker (the slot it was making may exist) leaves a
// store the relay refuses to stream for, naming the command; the recovery
// run again ends it, and the relay streams.
func TestUnfinishedRecoveryIsRefused(t *testing.T) {
	r := relayedThenStopped(t)
	ctx := context.Background()
	m, ok, err := catalog.ReadMarker(ctx, r.store, soleAppID(t, r.store))
	if err != nil || !ok {
		t.Fatalf("marker: %v %v", ok, err)
	}
	began := time.Now().UTC()
	m.RecoveringSince = &began
	if err := catalog.WriteMarker(ctx, r.store, m); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, r.env, "run", "--metrics-addr", "")
	if code == 0 || !strings.Contains(stderr, "did not finish") || !strings.Contains(stderr, "relay bootstrap --recover") {
		t.Fatalf("relay run after an unfinished recovery: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, r.env, "bootstrap", "--recover"); code != 0 {
		t.Fatalf("bootstrap --recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if m, _, _ := catalog.ReadMarker(ctx, r.store, m.AppID); m.RecoveringSince != nil {
		t.Fatal("the recovery left its mark in the marker")
	}
	p := startRelay(t, r.env)
	waitSlotActive(t, r.db.DSN, "deltabus", p)
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}
