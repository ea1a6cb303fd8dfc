package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// runCLI runs the relay binary to completion and returns exit code and
// stderr.
func runCLI(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(buildRelay(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestBadInputGetsOneClearLine: each misconfiguration exits non-zero with
// one line that names the problem and the fix, and writes nothing.
func TestBadInputGetsOneClearLine(t *testing.T) {
	db := setup(t)
	noPub := pgtest.NewDB(t)
	notOutbox := setup(t)
	notOutbox.Exec(t, `CREATE TABLE orders (id int primary key, total numeric)`)
	notOutbox.Exec(t, `ALTER PUBLICATION deltabus ADD TABLE orders`)
	replica := pgtest.NewServer(t, "wal_level = replica")

	cases := []struct {
		name, source, store string
		want                []string
		flags               []string
	}{
		{"no source", "", "file:///tmp/x", []string{"DELTABUS_SOURCE"}, nil},
		{"bad store", db.DSN, "ftp://nope", []string{"unsupported scheme", "file:///path"}, nil},
		{"relative store", db.DSN, "file://relative/path", []string{"absolute path"}, nil},
		{"unreachable database", "postgres://postgres@127.0.0.1:1/db?connect_timeout=2", "", []string{"cannot connect", "127.0.0.1"}, nil},
		{"wal_level", replica.DSN("postgres"), "", []string{"wal_level", "logical", "restart"}, nil},
		{"missing publication", noPub.DSN, "", []string{"publication", "relay migrate"}, nil},
		{"not an outbox", notOutbox.DSN, "", []string{"orders", "not a DeltaBus outbox"}, nil},
		{"table parallelism", db.DSN, "", []string{"--table-parallelism -1", "1-256"}, []string{"--table-parallelism", "-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			store := c.store
			if store == "" {
				store = "file://" + dir
			}
			args := append([]string{"run", "--metrics-addr", ""}, c.flags...)
			code, _, stderr := runCLI(t, []string{"DELTABUS_SOURCE=" + c.source, "DELTABUS_STORE=" + store}, args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; stderr: %s", stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one line on stderr, got %d:\n%s", len(lines), stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error %q does not mention %q", lines[0], w)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("store written to despite the error: %v", filepath.Join(dir, entries[0].Name()))
			}
		})
	}
}

// TestConnectionErrorsAreOneLine: every command that talks to PostgreSQL
// reports an unreachable server the same way: one line, the address and
// the cause once, no tabs, and no advice about an environment variable the
// user did not use.
func TestConnectionErrorsAreOneLine(t *testing.T) {
	dsn := "postgres://app@127.0.0.1:1/app?connect_timeout=2"
	store := "file://" + t.TempDir()
	for _, args := range [][]string{
		{"run", "--metrics-addr", ""}, {"migrate"}, {"status"}, {"reconcile", "--last", "1h"}, {"janitor"}, {"bootstrap"},
	} {
		code, stdout, stderr := runCLI(t, nil, append(args, "--source", dsn, "--store", store)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		switch {
		case code == 0:
			t.Errorf("relay %s: exit 0 against an unreachable server", args[0])
		case !strings.HasPrefix(last, "relay: cannot connect to PostgreSQL at 127.0.0.1:1: connection refused"):
			t.Errorf("relay %s: %q", args[0], last)
		case strings.Contains(last, "\t"), strings.Count(last, "refused") != 1, strings.Contains(last, "DELTABUS_SOURCE"):
			t.Errorf("relay %s: not one clean line: %q", args[0], last)
		case stdout != "":
			t.Errorf("relay %s printed %q on stdout", args[0], stdout)
		}
	}
}

// TestScheduledChecksThatCheckNothingSayIt: a reconcile run whose windows
// are all still open is not a pass (exit 3, "NOTHING CHECKED"), and
// `relay migrate` on a server without wal_level=logical warns that the
// relay will not start.
func TestScheduledChecksThatCheckNothingSayIt(t *testing.T) {
	url, store := localStore(t)
	s := newScenario(t, url, store, nil)
	p := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	code, stdout, _ := runCLI(t, s.env, "reconcile", "--last", "30m", "--no-record")
	if code != 3 || !strings.Contains(stdout, "NOTHING CHECKED") {
		t.Errorf("reconcile with only open windows: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI(t, s.env, "reconcile", "--lateness", "0s"); code == 0 || !strings.Contains(stderr, "--lateness") {
		t.Errorf("reconcile --lateness 0s: exit %d, %q", code, stderr)
	}
	replica := pgtest.NewServer(t, "wal_level = replica")
	code, _, stderr := runCLI(t, []string{"DELTABUS_SOURCE=" + replica.DSN("postgres")}, "migrate")
	if code != 0 || !strings.Contains(stderr, "warning: wal_level is \"replica\"") {
		t.Errorf("migrate on wal_level=replica: exit %d, %q", code, stderr)
	}
	s.stopWithin(p, 30*time.Second)
}
