package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/faultproxy"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

// The fault matrix: each test runs real relay processes against a real
// PostgreSQL and a real S3 server (versitygw) or local disk while
// producers write, injects one fault into the real process or server,
// checks that the relay reports it (not ready) and that SIGTERM still ends
// it in time, lifts the fault, and ends with every topic equal to the
// source: each event once, in source commit order.

// s3Scenario is a scenario whose relays reach their bucket through a fault
// proxy; the test's own store reads the bucket directly.
func s3Scenario(t testing.TB) (*scenario, *faultproxy.Proxy) {
	b := s3test.NewBucket(t)
	proxy := faultproxy.New(t, b.Endpoint)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	return newScenario(t, b.URL("bus"), store, s3Env(b, proxy.URL())), proxy
}

func setFault(t testing.TB, p *faultproxy.Proxy, f faultproxy.Fault) {
	t.Helper()
	if err := p.Set(f); err != nil {
		t.Fatal(err)
	}
}

// TestFaultS3ServerDown: the S3 server stops answering (connections
// refused) for a minute while producers write: the relay turns not ready
// and keeps its slot; SIGTERM still ends it within its shutdown timeout; a
// standby that takes over meanwhile rides out the outage and resumes by
// itself when the server is back.
func TestFaultS3ServerDown(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	s, proxy := s3Scenario(t)
	p := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	standby := s.relay("--standby")
	outage := faultDuration()
	s.produce(int(200*(outage.Seconds()+20)), 200)
	eventually(t, time.Minute, "first events", func() bool { return s.written() > 500 })
	setFault(t, proxy, faultproxy.Fault{Mode: faultproxy.Refuse})
	t.Logf("S3 down after %d events", s.written())
	s.waitReady(p, false, 30*time.Second)
	s.stopWithin(p, 15*time.Second)
	time.Sleep(outage / 2)
	if ok, _ := s.ready(standby); ok {
		t.Fatal("the standby is ready while S3 is down")
	}
	time.Sleep(outage / 2)
	setFault(t, proxy, faultproxy.Fault{})
	t.Logf("S3 back after %d events", s.written())
	s.waitReady(standby, true, 90*time.Second)
	s.finish(standby)
}

// TestFaultS3Errors: the S3 server answers every other request with 500,
// then every request with 503 SlowDown, then not at all (requests hang):
// the relay rides out the errors, turns not ready while requests hang,
// ends on SIGTERM within its shutdown timeout even with requests hung, and
// a new relay resumes once the server answers again.
func TestFaultS3Errors(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	s, proxy := s3Scenario(t)
	p := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	s.produce(12000, 200)
	eventually(t, time.Minute, "first events", func() bool { return s.written() > 500 })
	phase := max(faultDuration()/4, 10*time.Second)
	setFault(t, proxy, faultproxy.Fault{Mode: faultproxy.Error500, Every: 2})
	time.Sleep(phase)
	setFault(t, proxy, faultproxy.Fault{Mode: faultproxy.SlowDown503})
	time.Sleep(phase)
	setFault(t, proxy, faultproxy.Fault{Mode: faultproxy.Hang})
	s.waitReady(p, false, 45*time.Second)
	s.stopWithin(p, 15*time.Second)
	setFault(t, proxy, faultproxy.Fault{})
	p = s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	s.waitReady(p, true, time.Minute)
	s.finish(p)
}

// TestFaultLocalDiskFull: the local store runs out of space: the relay
// turns not ready and acknowledges nothing it could not write; SIGTERM
// ends it; once there is space again a new relay resumes.
func TestFaultLocalDiskFull(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	dir := filepath.Join(t.TempDir(), "store")
	mountTmpfs(t, dir, "2m")
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newScenario(t, "file://"+dir, store, nil)
	p := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	s.produce(15000, 400)
	s.waitReady(p, false, 2*time.Minute) // 2 MiB fill up
	t.Logf("store full after %d events", s.written())
	s.stopWithin(p, 15*time.Second)
	remount(t, dir, "512m")
	p = s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	s.waitReady(p, true, time.Minute)
	s.finish(p)
}

func mountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := exec.Command("mkdir", "-p", dir).Run(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs (the disk-full test runs as root): %v: %s", size, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// readOnlyDir is an empty folder on a read-only file system (a small
// tmpfs remounted ro: the tests run as root, whom permissions do not stop).
func readOnlyDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ro")
	mountTmpfs(t, dir, "1m")
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	return dir
}

func remount(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v: %s", dir, err, out)
	}
}

// TestFaultPostgresKilled: PostgreSQL dies by SIGKILL (no clean shutdown)
// mid-stream and comes back after crash recovery: the relay reconnects by
// itself and the topics end equal to the source.
func TestFaultPostgresKilled(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	// A killed server keeps what it wrote to the OS (fsync off is fine),
	// but asynchronous commits still in its WAL buffers die with it.
	srv := pgtest.NewServer(t, "synchronous_commit = on")
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
	migrate(t, db.Conn(t))
	url, store := localStore(t)
	s := &scenario{t: t, db: db, truth: newTruthSlot(t, db, "deltabus"), storeURL: url, store: store, slot: "deltabus",
		env:  []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + url},
		args: []string{"--batch-max-delay", "20ms", "--shutdown-timeout", "5s"}, addrs: map[*relayProc]string{}}
	p := s.relay()
	waitSlotActive(t, dsn, "deltabus", p)
	standby := s.relay("--standby")
	s.produce(8000, 400)
	eventually(t, time.Minute, "first events", func() bool { return s.written() > 1000 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL killed after %d events", s.written())
	s.waitReady(p, false, 30*time.Second)
	eventually(t, time.Minute, "PostgreSQL restart after crash recovery", func() bool { return srv.StartAgain(ctx) == nil })
	// Whichever relay reconnects first holds the slot; the other waits.
	active := s.waitTakeover([]*relayProc{p, standby}, 2*time.Minute)
	other := without([]*relayProc{p, standby}, active)[0]
	// Down again: SIGTERM ends the streaming relay while it cannot reach
	// the server, and the other resumes once the server is back.
	if err := srv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitReady(active, false, 30*time.Second)
	s.stopWithin(active, 15*time.Second)
	eventually(t, time.Minute, "PostgreSQL restart after crash recovery", func() bool { return srv.StartAgain(ctx) == nil })
	s.waitReady(other, true, 2*time.Minute)
	s.finish(other)
}

// TestFaultStandbyTakeovers: three relays with --standby: A streams, B and
// C wait; A is killed, one standby takes over, then that one is killed
// too: the last takes over. There is always a relay left streaming, and
// no standby gives up.
func TestFaultStandbyTakeovers(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	url, store := localStore(t)
	s := newScenario(t, url, store, nil, "--standby")
	a := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, a)
	b, c := s.relay(), s.relay()
	s.produce(8000, 400)
	time.Sleep(time.Second)
	relays := []*relayProc{a, b, c}
	for round := 1; round <= 2; round++ {
		active := s.streaming(relays)
		active.kill()
		t.Logf("round %d: killed the streaming relay after %d events", round, s.written())
		relays = without(relays, active)
		next := s.waitTakeover(relays, time.Minute)
		for _, p := range relays {
			if done, err := p.exited(); done {
				t.Fatalf("a standby exited: %v\n%s", err, p.tail())
			}
		}
		_ = next
	}
	s.finish(relays[0])
}

// streaming returns the relay that streams (ready), waiting for one.
func (s *scenario) streaming(relays []*relayProc) *relayProc {
	s.t.Helper()
	return s.waitTakeover(relays, time.Minute)
}

// waitTakeover waits until one of relays is ready and returns it.
func (s *scenario) waitTakeover(relays []*relayProc, limit time.Duration) *relayProc {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, p := range relays {
			if ok, _ := s.ready(p); ok {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var tails []string
	for _, p := range relays {
		tails = append(tails, p.tail())
	}
	s.t.Fatalf("no relay took over within %s:\n%s", limit, strings.Join(tails, "\n---\n"))
	return nil
}

func without(ps []*relayProc, x *relayProc) []*relayProc {
	var out []*relayProc
	for _, p := range ps {
		if p != x {
			out = append(out, p)
		}
	}
	return out
}

// TestFaultS3SilentAtStart: a store that accepts connections and never
// answers does not hold a start for its stall timeout times its retries
// (2.5 minutes): the contracts are read for at most 10 s, with one warning,
// and then the database's own error (no publication here) ends the process
// with one line and a non-zero exit.
func TestFaultS3SilentAtStart(t *testing.T) {
	db := pgtest.NewDB(t) // no publication
	hung := faultproxy.New(t, "127.0.0.1:1")
	if err := hung.Set(faultproxy.Fault{Mode: faultproxy.Hang}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildRelay(t), "run", "--metrics-addr", "")
	cmd.Env = append(cmd.Environ(), "DELTABUS_SOURCE="+db.DSN, "DELTABUS_STORE=s3://bucket/bus", "DELTABUS_S3_ENDPOINT="+hung.URL(),
		"DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=deltabus", "AWS_SECRET_ACCESS_KEY=not-a-secret")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if ctx.Err() != nil {
		t.Fatalf("relay run still waiting after %v against a silent store:\n%s", took, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if err == nil || !strings.Contains(last, "publication deltabus does not exist") {
		t.Fatalf("exit %v after %v, last line %q; want the missing publication named, non-zero", err, took, last)
	}
	if !strings.Contains(stderr.String(), "the contracts could not be read at start") {
		t.Errorf("no warning that the contracts were not read at start:\n%s", stderr.String())
	}
	t.Logf("refused after %v", took)
}
