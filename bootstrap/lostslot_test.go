package bootstrap_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
)

// TestLostSlotRecovery: the slot is dropped while producers keep writing;
// `relay run` refuses and names the recovery command; `relay bootstrap
// --recover` (producers still writing) re-reads the outbox, adds only the
// events the topics lack, warns about deleted rows; `relay run` then
// streams on, and every topic ends with the outbox's rows, each once.
func TestLostSlotRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay binary")
	}
	bin := buildRelay(t)
	db := newOutbox(t)
	fill(t, db, 20_000)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	stopProducers := startProducers(t, db, 4, 0)

	p := startRelay(t, bin, db, url, "run")
	if !p.waitOutput("msg=streaming", 3*time.Minute) {
		t.Fatalf("relay never streamed:\n%s", p.output())
	}
	time.Sleep(time.Second)
	if err := p.stop(); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.output())
	}
	before, _, _ := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	dropSlotWhenFree(t, db, "deltabus")
	time.Sleep(time.Second) // events arrive while there is no slot

	out, err := runRelay(t, bin, db, url, time.Minute, "run")
	if err == nil || !strings.Contains(out, "relay bootstrap --recover") {
		t.Fatalf("relay run with a lost slot: err %v, want a refusal naming `relay bootstrap --recover`:\n%s", err, out)
	}

	out, err = runRelay(t, bin, db, url, 5*time.Minute, "bootstrap", "--recover")
	if err != nil {
		t.Fatalf("relay bootstrap --recover: %v\n%s", err, out)
	}
	if !strings.Contains(out, bootstrap.RecoverWarning) {
		t.Errorf("recovery output lacks the warning:\n%s", out)
	}
	added, skipped := recoveryCounts(t, out)
	if added == 0 || skipped < 20_000 {
		t.Errorf("recovery added %d, found %d already there; want some added and the 20000 pre-filled found:\n%s", added, skipped, out)
	}
	after, _, _ := catalog.ReadMarker(t.Context(), store, cfg.AppID)
	if after.ConsistentPoint == before.ConsistentPoint {
		t.Errorf("marker not rewritten: %+v", after)
	}

	p = startRelay(t, bin, db, url, "run")
	if !p.waitOutput("msg=streaming", 3*time.Minute) {
		t.Fatalf("relay never streamed after recovery:\n%s", p.output())
	}
	time.Sleep(time.Second)
	live := stopProducers()
	waitCaughtUp(t, db, store, cfg.AppID, 2*time.Minute)
	if err := p.stop(); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.output())
	}
	t.Logf("recovery added %d events, skipped %d; %d produced concurrently", added, skipped, live)
	checkTopics(t, db, store, cfg.AppID, snapshotLSN(t, after))
}

var countLine = regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+(\d+)$`)

func recoveryCounts(t testing.TB, out string) (added, skipped int64) {
	for _, m := range countLine.FindAllStringSubmatch(out, -1) {
		a, _ := strconv.ParseInt(m[2], 10, 64)
		s, _ := strconv.ParseInt(m[3], 10, 64)
		added += a
		skipped += s
	}
	return added, skipped
}
