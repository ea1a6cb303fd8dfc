package bootstrap_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// buildRelay builds cmd/relay into a temporary directory.
func buildRelay(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/deltabus/deltabus/cmd/relay")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/relay: %v\n%s", err, out)
	}
	return bin
}

// relayProc is a relay subprocess with its output captured.
type relayProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *relayProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *relayProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startRelay(t testing.TB, bin string, db *pgtest.DB, storeURL string, args ...string) *relayProc {
	t.Helper()
	p := &relayProc{done: make(chan error, 1)}
	all := append(args, "--source", db.DSN, "--store", storeURL, "--log-level", "debug")
	if args[0] == "run" {
		all = append(all, "--metrics-addr", "")
	}
	p.cmd = exec.Command(bin, all...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.Env = append(os.Environ(), "DELTABUS_SOURCE=", "DELTABUS_STORE=")
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start relay: %v", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// runRelay runs one relay command to completion.
func runRelay(t testing.TB, bin string, db *pgtest.DB, storeURL string, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	p := startRelay(t, bin, db, storeURL, args...)
	select {
	case err := <-p.done:
		return p.output(), err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("relay %s did not finish in %s:\n%s", strings.Join(args, " "), timeout, p.output())
		return "", nil
	}
}

// waitOutput waits until the relay prints want, or exits.
func (p *relayProc) waitOutput(want string, d time.Duration) bool {
	return p.waitFirst(d, want) == want
}

// waitFirst waits until the relay prints one of wants (and returns it), or
// exits or d passes ("").
func (p *relayProc) waitFirst(d time.Duration, wants ...string) string {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out := p.output()
		for _, w := range wants {
			if strings.Contains(out, w) {
				return w
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			out := p.output()
			for _, w := range wants {
				if strings.Contains(out, w) {
					return w
				}
			}
			return ""
		case <-time.After(20 * time.Millisecond):
		}
	}
	return ""
}

func (p *relayProc) kill()       { _ = p.cmd.Process.Signal(syscall.SIGKILL); <-p.done }
func (p *relayProc) stop() error { _ = p.cmd.Process.Signal(syscall.SIGTERM); return <-p.done }
