package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/check"
)

var (
	binMu    sync.Mutex
	binPaths = map[string]string{}
)

// buildBinary builds a main package of the module once per test binary.
func buildBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPaths[pkg]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "deltabus-bin-")
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", p, "github.com/deltabus/deltabus/"+pkg).CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v: %s", pkg, err, out)
	}
	binPaths[pkg] = p
	return p
}

// startConsumer starts the example consumer as an OS process (so it can be
// SIGKILLed).
func startConsumer(t testing.TB, env []string, args ...string) *relayProc {
	t.Helper()
	return startProc(t, buildBinary(t, "examples/materialize"), env, args...)
}

// startProc starts bin; it reuses relayProc for kill/stop/output.
func startProc(tb testing.TB, bin string, env []string, args ...string) *relayProc {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), filepath.Base(bin)+".log")
	f, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &relayProc{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	tb.Cleanup(func() { _ = cmd.Process.Kill(); <-p.doneOnce() })
	return p
}

// runRelayCmd runs a relay command to completion: stdout, stderr, exit code.
func runRelayCmd(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildRelay(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("relay %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// latestVersion is the newest commit of a topic, -1 when it has no table.
func latestVersion(t testing.TB, root storage.Store, topic string) int64 {
	t.Helper()
	v, err := subscribe.ListLog(context.Background(), storage.Sub(root, topic), 0)
	if err != nil {
		t.Fatal(err)
	}
	return v.Last
}

// produceUntilVersion inserts one event per transaction into topic, paced
// so the relay commits most of them as their own version, until the
// topic's table reaches version want.
func produceUntilVersion(t testing.TB, dsn string, root storage.Store, topic string, want int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(3 * time.Minute)
	for n := 0; latestVersion(t, root, topic) < want; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("topic %s did not reach version %d", topic, want)
		}
		ev := outbox.NewEvent{Topic: topic, Key: fmt.Sprintf("k%d", n%10), Type: "Paced", Payload: map[string]int{"n": n}}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, ev) }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// checkRows runs `relay check consumers --json` and indexes the rows by group.
func checkRows(t testing.TB, env []string, args ...string) (map[string]check.Row, string, int) {
	t.Helper()
	out, errOut, code := runRelayCmd(t, env, append([]string{"check", "consumers", "--json"}, args...)...)
	var rows []check.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("check consumers output: %v\n%s\n%s", err, out, errOut)
	}
	m := map[string]check.Row{}
	for _, r := range rows {
		if _, dup := m[r.Group]; dup {
			t.Fatalf("two rows for %s/%s", r.Group, r.Topic)
		}
		m[r.Group] = r
	}
	return m, errOut, code
}

// pacedProducer writes n events at about rate events/s, in transactions of
// 1-4 events over "orders" and "payments", from 4 connections; written
// counts what committed.
type pacedProducer struct {
	written atomic.Int64
}

func (p *pacedProducer) run(ctx context.Context, t testing.TB, dsn string, rate, n int) {
	var wg sync.WaitGroup
	start := time.Now()
	var next atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				k := int64(1 + (w+int(next.Load()))%4)
				first := next.Add(k) - k
				if first >= int64(n) {
					return
				}
				k = min(k, int64(n)-first)
				if d := time.Until(start.Add(time.Duration(float64(first) / float64(rate) * float64(time.Second)))); d > 0 {
					time.Sleep(d)
				}
				evs := make([]outbox.NewEvent, k)
				for i := range evs {
					tp := []string{"orders", "orders", "payments"}[(first+int64(i))%3]
					evs[i] = outbox.NewEvent{Topic: tp, Key: fmt.Sprintf("k%d", (first+int64(i))%50), Type: "Happened",
						Payload: map[string]int64{"n": first + int64(i)}}
				}
				if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, evs...) }); err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				p.written.Add(k)
			}
		}()
	}
	wg.Wait()
}
