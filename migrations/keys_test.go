package migrations_test

import (
	"strings"
	"testing"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestApplyKeysAddsTheErasureTable: key tables an older release created
// (without deltabus.erased_subjects) get it at the next relay migrate;
// the keys stay.
func TestApplyKeysAddsTheErasureTable(t *testing.T) {
	ctx := testCtx(t)
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	rep, err := migrations.ApplyKeys(ctx, conn)
	if err != nil || !rep.Changed() || !strings.Contains(rep.String(), migrations.ErasedTable) {
		t.Fatalf("first: %v %v", rep, err)
	}
	db.Exec(t, `INSERT INTO deltabus.subject_keys (subject, topic, wrapped) VALUES ('\x00112233445566778899aabbccddeeff', 't', '\x00')`)
	db.Exec(t, "DROP TABLE deltabus.erased_subjects")
	rep, err = migrations.ApplyKeys(ctx, conn)
	if err != nil || !rep.Changed() || !strings.Contains(rep.String(), "created the erasure table") {
		t.Fatalf("after an older release: %v %v", rep, err)
	}
	var keys, erased int
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM deltabus.subject_keys), (SELECT count(*) FROM deltabus.erased_subjects)").Scan(&keys, &erased); err != nil || keys != 1 {
		t.Fatalf("keys %d erased %d: %v", keys, erased, err)
	}
	if rep, err := migrations.ApplyKeys(ctx, conn); err != nil || rep.Changed() {
		t.Fatalf("third: %v %v", rep, err)
	}
}
