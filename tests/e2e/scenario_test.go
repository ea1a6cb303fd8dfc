package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

// scenario is a fault test's stage: a migrated database with a truth slot,
// paced producers writing over every topic, and relay processes (real OS
// processes, each serving /readyz) that the test stops, kills and
// restarts while it injects a fault.
type scenario struct {
	t        testing.TB
	db       *pgtest.DB
	truth    *truthSlot
	storeURL string
	store    storage.Store
	slot     string // the relay's slot: unique, so scenarios can run in parallel on one cluster
	env      []string
	args     []string

	mu    sync.Mutex
	procs []*relayProc
	addrs map[*relayProc]string

	prod     producers
	prodDSN  string // producers connect here (default db.DSN)
	events   int
	produced chan struct{}
	cancel   context.CancelFunc
}

// faultDuration is how long a timed fault lasts: 60 s as the issue asks,
// shorter with DELTABUS_FAULT_SECONDS for local iteration.
func faultDuration() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_FAULT_SECONDS")); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	return 60 * time.Second
}

// newScenario prepares the database and the truth slot; start begins.
func newScenario(t testing.TB, storeURL string, store storage.Store, env []string, args ...string) *scenario {
	db := setup(t)
	slot := fmt.Sprintf("relay_%08x", rand.Uint32())
	s := &scenario{t: t, db: db, truth: newTruthSlot(t, db, "deltabus"), storeURL: storeURL, store: store, slot: slot,
		env:  append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL, "DELTABUS_SLOT=" + slot}, env...),
		args: append([]string{"--batch-max-delay", "20ms", "--shutdown-timeout", "5s"}, args...), addrs: map[*relayProc]string{}}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		logProblems(t, s.procs)
	})
	return s
}

// s3Env is the environment that points a relay at bucket b through endpoint.
func s3Env(b *s3test.Bucket, endpoint string) []string {
	return []string{"DELTABUS_S3_ENDPOINT=" + endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region,
		"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey}
}

// relay starts a relay process (extra args after the scenario's) serving
// /readyz on a free port.
func (s *scenario) relay(extra ...string) *relayProc {
	s.t.Helper()
	addr := freeAddr(s.t)
	p := startRelay(s.t, s.env, append(append(append([]string{}, s.args...), "--metrics-addr", addr), extra...)...)
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.addrs[p] = addr
	s.mu.Unlock()
	return p
}

// produce starts the producers: events in 1-4 event transactions over
// every topic, at about rate events per second.
func (s *scenario) produce(events, rate int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	s.cancel, s.events, s.produced = cancel, events, make(chan struct{})
	s.t.Cleanup(cancel)
	s.prod.rate = rate
	dsn := s.prodDSN
	if dsn == "" {
		dsn = s.db.DSN
	}
	go func() { s.prod.run(ctx, s.t, dsn, 4, events); close(s.produced) }()
}

// written is how many events the producers committed so far.
func (s *scenario) written() int64 { return s.prod.written.Load() }

// ready asks the relay's /readyz.
func (s *scenario) ready(p *relayProc) (bool, string) {
	s.mu.Lock()
	addr := s.addrs[p]
	s.mu.Unlock()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b))
}

// waitReady waits until /readyz answers want, failing the test after limit.
func (s *scenario) waitReady(p *relayProc, want bool, limit time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := s.ready(p)
		if ok == want {
			return
		}
		if done, err := p.exited(); done {
			s.t.Fatalf("relay exited while waiting for ready=%v: %v\n%s", want, err, p.tail())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("relay not ready=%v within %s (last: %s)\n%s", want, limit, why, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopWithin sends SIGTERM and fails unless the process exits in time.
func (s *scenario) stopWithin(p *relayProc, limit time.Duration) {
	s.t.Helper()
	began := time.Now()
	err := p.stop(limit)
	if err != nil && strings.Contains(err.Error(), "did not stop") {
		s.t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
	s.t.Logf("SIGTERM: exited in %s (%v)", time.Since(began).Round(10*time.Millisecond), err)
}

// finish waits for the producers, for the relay p to confirm everything,
// stops it with SIGTERM and checks every topic against the source.
func (s *scenario) finish(p *relayProc) {
	s.t.Helper()
	select {
	case <-s.produced:
	case <-time.After(10 * time.Minute):
		s.t.Fatal("producers did not finish")
	}
	waitDrained(s.t, s.db.DSN, s.slot, 3*time.Minute)
	s.stopWithin(p, 30*time.Second)
	rows := s.truth.read(s.t)
	// More rows than events: a producer's commit whose acknowledgement was
	// lost (PostgreSQL killed) was retried as new events.
	if len(rows) < s.events {
		s.t.Fatalf("truth slot saw %d inserts, producers wrote %d", len(rows), s.events)
	}
	checkAgainstTruth(s.t, s.store, rows)
}

// freeAddr returns a free 127.0.0.1 port.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond every 100 ms until it holds or limit passes.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
