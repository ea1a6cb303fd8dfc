package bootstrap_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestCrashDuringBootstrap: `relay run` as a subprocess is SIGKILLed at
// random moments of its first-start bootstrap (while producers keep
// inserting) and restarted until it streams; afterwards every topic holds
// exactly the outbox's rows, once each.
func TestCrashDuringBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay binary")
	}
	// Big enough that the copy takes a good fraction of a second: a kill
	// must land before the snapshot commit to count.
	n, kills := 200_000, 5
	if longRun() {
		n, kills = 1_000_000, 10
	}
	bin := buildRelay(t)
	db := newOutbox(t)
	fill(t, db, n)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	stopProducers := startProducers(t, db, 4, 0)

	// Kill points: after each stage's log line, plus a random delay.
	stages := []string{"first start", "slot created with an exported snapshot", "bootstrap: copying", "bootstrap: copying", "unit copied"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killed := 0
	for attempt := 0; killed < kills && attempt < 3*kills; attempt++ {
		p := startRelay(t, bin, db, url, "run")
		stage := stages[rng.IntN(len(stages))]
		// A bootstrap may finish before the stage comes up (the last one
		// was cut short after its marker): then it streams.
		if got := p.waitFirst(3*time.Minute, stage, "msg=streaming"); got == "" {
			t.Fatalf("relay never logged %q:\n%s", stage, p.output())
		}
		delay := 300
		if stage == "unit copied" {
			delay = 30 // the other units are close behind, then the commit
		}
		time.Sleep(time.Duration(rng.IntN(delay)) * time.Millisecond)
		if strings.Contains(p.output(), "msg=streaming") {
			t.Logf("attempt %d: bootstrap finished before the kill (stage %q)", attempt, stage)
			if err := p.stop(); err != nil {
				t.Fatalf("relay: %v\n%s", err, p.output())
			}
			break
		}
		p.kill()
		if _, marker, _ := catalog.ReadMarker(t.Context(), store, cfg.AppID); marker {
			t.Logf("attempt %d: SIGKILL after %q landed after the bootstrap committed", attempt, stage)
			if killed > 0 {
				break
			}
			// No kill has landed inside a bootstrap yet: start over as a
			// first start (no slot, empty store) so the next one can.
			startOver(t, db, url, cfg.Slot)
			continue
		}
		killed++
		t.Logf("attempt %d: SIGKILL during the bootstrap, after %q", attempt, stage)
	}
	if killed == 0 {
		t.Fatal("no kill landed during the bootstrap")
	}

	p := startRelay(t, bin, db, url, "run")
	if !p.waitOutput("msg=streaming", 5*time.Minute) {
		t.Fatalf("relay never streamed after %d kills:\n%s", killed, p.output())
	}
	time.Sleep(time.Second)
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	if err := p.stop(); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.output())
	}
	m, ok, err := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if err != nil || !ok {
		t.Fatalf("no marker: %v", err)
	}
	t.Logf("%d kills during bootstrap, %d rows pre-filled, %d produced concurrently", killed, n, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, m))
}

// startOver drops the slot (once its killed walsender is gone) and empties
// the store, so the next relay makes a first start again.
func startOver(t *testing.T, db *pgtest.DB, url, slot string) {
	t.Helper()
	dropSlotWhenFree(t, db, slot)
	dir := strings.TrimPrefix(url, "file://")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}
