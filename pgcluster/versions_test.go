package pgcluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestParseMajor(t *testing.T) {
	for in, want := range map[string]int{
		"postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)\n": 15,
		"postgres (PostgreSQL) 13.23\n":                          13,
		"postgres (PostgreSQL) 18beta1\n":                        18,
		"postgres (PostgreSQL) 9.6.24\n":                         9,
	} {
		if got, err := parseMajor(in); err != nil || got != want {
			t.Errorf("parseMajor(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "postgres 15.1", "postgres (PostgreSQL) x"} {
		if got, err := parseMajor(in); err == nil {
			t.Errorf("parseMajor(%q) = %d, want an error", in, got)
		}
	}
}

// TestStartVersionRunsEachInstalledMajor: a cluster of every installed
// major runs that major's server, reports it, and decodes logically.
func TestStartVersionRunsEachInstalledMajor(t *testing.T) {
	majors, err := Majors()
	if err != nil {
		t.Fatal(err)
	}
	if len(majors) == 0 {
		t.Fatal("no PostgreSQL installed: run `bash scripts/deps.sh postgres pgversions`")
	}
	t.Logf("installed majors: %v", majors)
	for _, m := range majors {
		t.Run(strconv.Itoa(m), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := StartVersion(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if s.Major != m {
				t.Errorf("Server.Major = %d, want %d", s.Major, m)
			}
			conn, err := pgx.Connect(ctx, s.DSN("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var num int
			var level string
			if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('wal_level')").Scan(&num, &level); err != nil {
				t.Fatal(err)
			}
			if num/10000 != m || level != "logical" {
				t.Errorf("server_version_num %d, wal_level %s; want major %d, logical", num, level, m)
			}
		})
	}
}

// TestStartVersionNotInstalled: asking for a major that is not installed
// says how to install it.
func TestStartVersionNotInstalled(t *testing.T) {
	_, err := StartVersion(context.Background(), 7)
	if err == nil || !strings.Contains(err.Error(), "scripts/deps.sh pgversions") {
		t.Fatalf("StartVersion(7): %v; want an error naming scripts/deps.sh pgversions", err)
	}
}
