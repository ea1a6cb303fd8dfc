package bootstrap_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
)

// TestRebuildSurvivesKills: while producers insert into every topic, a
// topic lost while the relay was down is rebuilt with `relay rebuild`, and
// at random moments of the rebuild either the relay or the rebuild command
// is SIGKILLed (a killed rebuild leaves the topic paused; the next rebuild
// takes over). A final rebuild completes; afterwards every topic holds
// exactly the outbox's rows, once each.
func TestRebuildSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay binary")
	}
	n, kills := 30_000, 4
	if longRun() {
		n, kills = 500_000, 10
	}
	bin := buildRelay(t)
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	// Paced: on two shared cores, four unpaced producers outrun a relay
	// that is killed and re-reads the stream, and the test only grows.
	stopProducers := startProducers(t, db, 4, 2*time.Millisecond)
	startStreaming := func() *relayProc {
		p := startRelay(t, bin, db, url, "run")
		if !p.waitOutput("msg=streaming", 3*time.Minute) {
			t.Fatalf("relay never streamed:\n%s", p.output())
		}
		return p
	}
	r := startStreaming()
	time.Sleep(time.Second)
	if err := r.stop(); err != nil {
		t.Fatalf("relay: %v\n%s", err, r.output())
	}
	const lost = "topic-2"
	if err := os.RemoveAll(filepath.Join(strings.TrimPrefix(url, "file://"), lost)); err != nil {
		t.Fatal(err)
	}
	r = startStreaming()

	stages := []string{"pause watermark written", "copying the topic under the snapshot", "snapshot handed to the relay"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	began := time.Now()
	for k := range kills {
		rb := startRelay(t, bin, db, url, "rebuild", "--topic", lost, "--pause-wait", "3m")
		stage := stages[rng.IntN(len(stages))]
		if !rb.waitOutput(stage, 3*time.Minute) {
			t.Fatalf("rebuild never logged %q:\n%s\nrelay:\n%s", stage, rb.output(), r.output())
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if rng.IntN(2) == 0 {
			r.kill()
			t.Logf("%s kill %d: relay SIGKILLed after rebuild logged %q", since(began), k, stage)
			r = startStreaming()
			if err := waitDone(rb, 5*time.Minute); err != nil {
				t.Fatalf("rebuild after a relay kill: %v\n%s", err, rb.output())
			}
		} else {
			rb.kill()
			t.Logf("%s kill %d: rebuild SIGKILLed after it logged %q", since(began), k, stage)
		}
	}
	out, err := runRelay(t, bin, db, url, 5*time.Minute, "rebuild", "--topic", lost)
	if err != nil || !strings.Contains(out, "committed by the relay") {
		t.Fatalf("final rebuild: %v\n%s", err, out)
	}
	t.Logf("%s final rebuild committed", since(began))
	time.Sleep(time.Second)
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	t.Logf("%s caught up", since(began))
	if err := r.stop(); err != nil {
		t.Fatalf("relay: %v\n%s", err, r.output())
	}
	m, ok, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil || !ok {
		t.Fatalf("no marker: %v", err)
	}
	t.Logf("%d kills during rebuilds, %d rows pre-filled, %d produced concurrently", kills, n, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// waitDone waits for a command to exit and returns its error.
func waitDone(p *relayProc, d time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		p.kill()
		return os.ErrDeadlineExceeded
	}
}
