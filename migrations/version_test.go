package migrations_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestApplyAndCheckOnEverySupportedVersion: Apply, then Check, hold on
// every supported major installed (the publication's column lists and row
// filters are read only from 15 on).
func TestApplyAndCheckOnEverySupportedVersion(t *testing.T) {
	for _, major := range pgtest.Versions(t) {
		t.Run(strconv.Itoa(major), func(t *testing.T) {
			db := pgtest.NewDBVersion(t, major)
			conn := db.Conn(t)
			if _, err := migrations.Apply(testCtx(t), conn, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if err := migrations.Check(testCtx(t), conn, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if err := migrations.CheckServerVersion(testCtx(t), conn); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRefusesPostgreSQL13: Apply changes nothing and Check fails, each in
// one line that names the version and says to upgrade.
func TestRefusesPostgreSQL13(t *testing.T) {
	srv := pgtest.NewServerVersion(t, 13)
	conn, err := pgx.Connect(testCtx(t), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testCtx(t))
	_, applyErr := migrations.Apply(testCtx(t), conn, migrations.Options{})
	checkErr := migrations.Check(testCtx(t), conn, migrations.Options{})
	versionErr := migrations.CheckServerVersion(testCtx(t), conn)
	for what, err := range map[string]error{"Apply": applyErr, "Check": checkErr, "CheckServerVersion": versionErr} {
		if err == nil || strings.Contains(err.Error(), "\n") ||
			!strings.Contains(err.Error(), "PostgreSQL 13.") || !strings.Contains(err.Error(), "14 or later") || !strings.Contains(err.Error(), "upgrade") {
			t.Errorf("%s on PostgreSQL 13: %v; want one line naming 13, 14 or later and the upgrade", what, err)
		}
	}
	var made int
	if err := conn.QueryRow(testCtx(t), `SELECT (SELECT count(*) FROM pg_class WHERE relname = 'outbox')
		+ (SELECT count(*) FROM pg_publication)`).Scan(&made); err != nil || made != 0 {
		t.Errorf("Apply refused but made %d objects (%v)", made, err)
	}
}
