package bootstrap

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestEstimateWithoutStatistics: an outbox that was never analyzed
// (reltuples = -1) still gets a row estimate near the truth, so the
// progress line does not say 100% from the start.
func TestEstimateWithoutStatistics(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn := db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload)
		SELECT 'orders', 'k' || g, 'Created', jsonb_build_object('n', g, 'note', repeat('x', g % 200)) FROM generate_series(1, 20000) g`)
	var reltuples float64
	if err := conn.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE relname = 'outbox'`).Scan(&reltuples); err != nil || reltuples >= 0 {
		t.Fatalf("reltuples = %v (%v): the table was analyzed, the test needs it not to be", reltuples, err)
	}
	srcs, err := publishedSources(ctx, conn, "deltabus", outbox.Mappings{})
	if err != nil {
		t.Fatal(err)
	}
	if est := srcs[0].estRows; est < 14000 || est > 26000 {
		t.Fatalf("estimated %d rows for 20,000 (want within 30%%)", est)
	}
	db.Exec(t, `ANALYZE outbox`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload)
		SELECT 'orders', 'k' || g, 'Created', jsonb_build_object('n', g, 'note', repeat('x', g % 200)) FROM generate_series(1, 20000) g`)
	srcs, err = publishedSources(ctx, conn, "deltabus", outbox.Mappings{})
	if err != nil {
		t.Fatal(err)
	}
	if est := srcs[0].estRows; est < 32000 || est > 48000 {
		t.Fatalf("estimated %d rows after the table doubled since ANALYZE (want the density scaled to its size)", est)
	}
}
