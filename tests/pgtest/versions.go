package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgcluster"
)

// A test that must hold on every supported PostgreSQL runs over Versions,
// one subtest each, on NewServerVersion or NewDBVersion; a test of one
// version asks for it by number. The rest run on the default major
// (Major): DELTABUS_PG_MAJOR runs a whole test binary on another, which is
// how scripts/test.sh runs the core end-to-end tests on every supported
// major. Where the binaries of each major are: package pgcluster.

// MinMajor is migrations.MinMajor, the oldest supported major
// (TestMinMajorIsMigrations checks they agree): pgtest cannot import
// migrations, whose dependencies' own tests use pgtest.
const MinMajor = 14

// Versions returns the supported major versions installed here (from
// MinMajor on), oldest first. None fails the test.
func Versions(t testing.TB) []int {
	t.Helper()
	all, err := pgcluster.Majors()
	if err != nil {
		t.Fatalf("installed PostgreSQL versions: %v", err)
	}
	var majors []int
	for _, m := range all {
		if m >= MinMajor {
			majors = append(majors, m)
		}
	}
	if len(majors) == 0 {
		t.Fatalf("no PostgreSQL %d or later installed (found %v): run `bash scripts/deps.sh postgres pgversions`", MinMajor, all)
	}
	return majors
}

// Major returns the major version of the servers this test binary starts
// by default (NewServer, and NewDB's unless DELTABUS_TEST_PG names a
// server, whose version it then reads).
func Major(t testing.TB) int {
	t.Helper()
	if os.Getenv("DELTABUS_TEST_PG") != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, SharedDSN(t))
		if err != nil {
			t.Fatalf("connect to DELTABUS_TEST_PG: %v", err)
		}
		defer conn.Close(ctx)
		var v int
		if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
			t.Fatalf("server version of DELTABUS_TEST_PG: %v", err)
		}
		return v / 10000
	}
	m, err := pgcluster.DefaultMajor()
	if err != nil {
		t.Fatalf("default PostgreSQL version: %v", err)
	}
	return m
}

// NewServerVersion is NewServer with the binaries of a major version. A
// major that is not installed fails the test, naming how to install it.
func NewServerVersion(t testing.TB, major int, extraConf ...string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgcluster.StartVersion(ctx, major, extraConf...)
	if err != nil {
		t.Fatalf("start PostgreSQL %d: %v", major, err)
	}
	t.Cleanup(s.Stop)
	return s
}
