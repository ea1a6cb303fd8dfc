package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// crashScale is the size of the crash tests: small in CI, the full
// 200k events / 20 kills with DELTABUS_LONG=1.
func crashScale() (events, kills int) {
	if os.Getenv("DELTABUS_LONG") != "" {
		return 200_000, 20
	}
	events, kills = 12_000, 6
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_CRASH_EVENTS")); err == nil {
		events = v
	}
	return events, kills
}

// TestCrashExactlyOnceLocal: 4 producers write over 5 topics with
// multi-topic transactions while the relay process is SIGKILLed at random
// moments and restarted; each topic must end with exactly the source's ids,
// once each, in source commit order.
func TestCrashExactlyOnceLocal(t *testing.T) {
	url, store := localStore(t)
	crashTest(t, url, store, nil)
}

// TestCrashExactlyOnceLocalOverlap is the same with the commit stages
// overlapped (--commit-overlap): kills land with two batches in flight,
// the second's files written while the first's log entries are made
// durable.
func TestCrashExactlyOnceLocalOverlap(t *testing.T) {
	url, store := localStore(t)
	crashTest(t, url, store, nil, "--commit-overlap")
}

// TestCrashExactlyOnceS3 is the same against a real S3 server (versitygw).
func TestCrashExactlyOnceS3(t *testing.T) {
	b := s3test.NewBucket(t)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"DELTABUS_S3_ENDPOINT=" + b.Endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region,
		"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey,
	}
	crashTest(t, b.URL("bus"), store, env)
}

func crashTest(t testing.TB, storeURL string, store storage.Store, extraEnv []string, extraArgs ...string) {
	events, kills := crashScale()
	db := setup(t)
	truth := newTruthSlot(t, db, "deltabus")
	env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}, extraEnv...)
	// The default batching (group commit, no delay): kills land while a
	// batch's files or log entries are being written (with
	// --commit-overlap among extraArgs, in the pipeline with two batches
	// in flight).
	args := append([]string{"--standby", "--batch-max-events", "2000"}, extraArgs...)
	p := startRelay(t, env, args...)
	procs := []*relayProc{p}
	t.Cleanup(func() { logProblems(t, procs) })
	waitSlotActive(t, db.DSN, "deltabus", p)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var prod producers
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, db.DSN, 4, events); close(produced) }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(150+rng.IntN(900)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("relay exited on its own: %v\n%s", err, p.tail())
		}
		p.kill()
		t.Logf("kill %d: SIGKILL after %d events written", i+1, prod.written.Load())
		p = startRelay(t, env, args...)
		procs = append(procs, p)
	}
	<-produced
	// The last relay started just after a kill; the slot may be drained
	// already (a commit is acknowledged once durable), so wait until this
	// relay streams before asking it to stop.
	waitSlotActive(t, db.DSN, "deltabus", p)
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop cleanly on SIGTERM: %v\n%s", err, p.tail())
	}
	rows := truth.read(t)
	if len(rows) != events {
		t.Fatalf("truth slot saw %d inserts, producers wrote %d", len(rows), events)
	}
	checkAgainstTruth(t, store, rows)
	checkTransactionRecords(t, store, rows)
}

// logProblems prints, after a failure, every warning and error the relay
// processes logged.
func logProblems(t testing.TB, procs []*relayProc) {
	if !t.Failed() {
		return
	}
	for i, p := range procs {
		for _, line := range strings.Split(p.output(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "relay:") {
				t.Logf("relay %d: %s", i, line)
			}
		}
	}
}
