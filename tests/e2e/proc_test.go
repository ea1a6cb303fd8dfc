package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// relayProc is a relay running as a real OS process, so tests can SIGKILL it.
type relayProc struct {
	t    testing.TB
	cmd  *exec.Cmd
	log  string
	done chan error
	// killed: the test killed it (a supervisor tells that exit from one of
	// the relay's own).
	killed bool
}

// startRelay starts `relay run` with env (KEY=VALUE) and extra args.
func startRelay(t testing.TB, env []string, args ...string) *relayProc {
	t.Helper()
	bin := buildRelay(t)
	logPath := filepath.Join(t.TempDir(), "relay.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"run", "--metrics-addr", "", "--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{t: t, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.doneOnce() })
	return p
}

func (p *relayProc) doneOnce() <-chan error {
	c := make(chan error, 1)
	go func() {
		select {
		case err := <-p.done:
			p.done <- err // keep it for later callers
			c <- err
		case <-time.After(30 * time.Second):
			c <- fmt.Errorf("relay did not exit")
		}
	}()
	return c
}

// kill sends SIGKILL and waits for the process to die.
func (p *relayProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.doneOnce()
}

// stop sends SIGTERM and returns the exit error (nil for exit 0).
func (p *relayProc) stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.doneOnce():
		return err
	case <-time.After(timeout):
		return fmt.Errorf("relay did not stop within %v after SIGTERM", timeout)
	}
}

// exited reports whether the process has exited, and how.
func (p *relayProc) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

func (p *relayProc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail returns the last lines of the relay's log, for failure messages.
func (p *relayProc) tail() string {
	lines := strings.Split(strings.TrimSpace(p.output()), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// waitSlotActive waits until the slot exists and a relay streams from it.
func waitSlotActive(t testing.TB, dsn, slot string, p *relayProc) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var active bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		if err != nil {
			t.Fatal(err)
		}
		// The slot is also active during a first start's bootstrap (its
		// exporting connection holds it): wait for the relay to stream.
		if out := p.output(); active && (strings.Contains(out, "msg=streaming") || strings.Contains(out, `"msg":"streaming"`)) {
			return
		}
		if done, err := p.exited(); done {
			t.Fatalf("relay exited before streaming: %v\n%s", err, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("relay never started streaming\n%s", p.tail())
}
