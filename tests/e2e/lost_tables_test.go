package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// lostSource is one source of TestLostTableStaysLostToEachSource: a
// database of its own with its slot, and its relay process.
type lostSource struct {
	t     *testing.T
	db    *pgtest.DB
	slot  string
	env   []string
	appID string
	p     *relayProc
	sent  []string // ids of its orders events
}

func newLostSource(t *testing.T, url, name string) *lostSource {
	db := setup(t)
	slot := fmt.Sprintf("lost_%s_%08x", name, rand.Uint32())
	return &lostSource{t: t, db: db, slot: slot, appID: db.AppID(t, slot),
		env: []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}}
}

func (s *lostSource) start() {
	s.t.Helper()
	s.p = startRelay(s.t, s.env, "--batch-max-delay", "20ms")
	waitSlotActive(s.t, s.db.DSN, s.slot, s.p)
}

func (s *lostSource) stop() {
	s.t.Helper()
	if err := s.p.stop(30 * time.Second); err != nil {
		s.t.Fatalf("SIGTERM: %v\n%s", err, s.p.tail())
	}
}

func (s *lostSource) send(n int) {
	s.t.Helper()
	for i := range n {
		s.sent = append(s.sent, insertEvent(s.t, s.db, "orders", "OrderPlaced", 1, fmt.Sprintf(`{"order_id": %d}`, i)))
	}
}

func (s *lostSource) held(store storage.Store) bool {
	st, _, err := catalog.ReadRebuildState(context.Background(), store, s.appID, "orders")
	return err == nil && st.Paused == catalog.HoldMissingTable
}

// streamedPast inserts an event into another topic and waits for it: the
// relay read everything before it.
func (s *lostSource) streamedPast(store storage.Store) {
	s.t.Helper()
	id := insertEvent(s.t, s.db, "payments", "Paid", 1, `{}`)
	eventually(s.t, time.Minute, "payments streamed", func() bool { return slices.Contains(topicIDsSoFar(s.t, store, "payments"), id) })
}

// ordersOf returns the ids of source appID's rows of orders.
func ordersOf(t testing.TB, store storage.Store, appID string) []string {
	rows, err := verify.ReadTopic(context.Background(), store, "orders")
	if err != nil {
		return nil
	}
	var ids []string
	for _, r := range rows {
		if r.Source == appID {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// TestLostTableStaysLostToEachSource: sources A and B share topic orders;
// its table is lost; both relays hold it. A's operator rebuilds it: the
// new table holds A's events. B's relay, restarted (as any deploy does),
// must still hold orders: its events that were in the lost table are not
// in the new one, and streaming on from its position would lose them for
// good. B's own rebuild then restores them, and orders holds every event
// of both sources once.
func TestLostTableStaysLostToEachSource(t *testing.T) {
	t.Parallel()
	url, store := localStore(t)
	a, b := newLostSource(t, url, "a"), newLostSource(t, url, "b")
	a.start()
	b.start()
	a.send(20)
	b.send(20)
	waitDrained(t, a.db.DSN, a.slot, time.Minute)
	waitDrained(t, b.db.DSN, b.slot, time.Minute)
	a.stop()
	b.stop()

	moveAway(t, url, "orders")
	b.start()
	b.send(1)
	eventually(t, time.Minute, "B holds orders", func() bool { return b.held(store) })
	a.start()
	a.send(1)
	eventually(t, time.Minute, "A holds orders", func() bool { return a.held(store) })
	if out := runOK(t, a.env, "rebuild", "--topic", "orders"); !strings.Contains(out, "committed by the relay") {
		t.Fatalf("A's rebuild: %s\n%s", out, a.p.tail())
	}
	eventually(t, time.Minute, "A's events restored", func() bool { return len(ordersOf(t, store, a.appID)) == len(a.sent) })

	b.stop()
	b.start()
	b.send(5)
	b.streamedPast(store)
	if got := ordersOf(t, store, b.appID); len(got) != 0 || !b.held(store) {
		t.Fatalf("B restarted after A's rebuild streams orders on (%d of its events in the table, held %v): its %d events of the lost table are gone\n%s",
			len(got), b.held(store), 20, b.p.tail())
	}
	if out := runOK(t, b.env, "rebuild", "--topic", "orders"); !strings.Contains(out, "committed by the relay") {
		t.Fatalf("B's rebuild: %s\n%s", out, b.p.tail())
	}
	for _, s := range []*lostSource{a, b} {
		waitDrained(t, s.db.DSN, s.slot, time.Minute)
		got := ordersOf(t, store, s.appID)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(s.sent))
		if !slices.Equal(got, want) {
			t.Errorf("orders holds %d events of source %s, want its %d, once each", len(got), s.appID, len(want))
		}
		s.stop()
	}
}

// runOK runs a relay command that must succeed and returns its output.
func runOK(t testing.TB, env []string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, args...)
	if code != 0 {
		t.Fatalf("relay %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout + stderr
}

// TestTableRestoredToAnOlderCopy: a topic's table is put back from an
// older copy of itself (a backup) while the relay streams: the relay
// never writes on the older log, holds the topic, and `relay rebuild`
// restores every event once.
func TestTableRestoredToAnOlderCopy(t *testing.T) {
	t.Parallel()
	lost := topics[0]
	s, p := streamingLocal(t, 6000, 300, lost, 100)
	dir := strings.TrimPrefix(s.storeURL, "file://")
	// A consistent copy: the log first, then the data files, which every
	// commit of the copied log wrote before it.
	backup := filepath.Join(t.TempDir(), lost)
	from := filepath.Join(dir, lost)
	script := `mkdir -p "$2" && cp -a "$1/_delta_log" "$2/" && find "$1" -maxdepth 1 -type f -exec cp -a {} "$2/" \;`
	if out, err := exec.Command("sh", "-c", script, "sh", from, backup).CombinedOutput(); err != nil {
		t.Fatalf("back up the table: %v: %s", err, out)
	}
	before := topicRows(t, s, lost)
	eventually(t, time.Minute, "more events after the copy", func() bool { return topicRows(t, s, lost) > before+200 })
	if err := os.Rename(filepath.Join(dir, lost), filepath.Join(t.TempDir(), "newer")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(backup, filepath.Join(dir, lost)); err != nil {
		t.Fatal(err)
	}
	t.Logf("table %s put back from a copy of %d events, after %d written", lost, before, s.written())
	eventually(t, time.Minute, lost+" held", func() bool {
		return heldState(context.Background(), s.store, lost).Paused == catalog.HoldMissingTable
	})
	if got := topicRows(t, s, lost); got > before+50 {
		t.Fatalf("the relay wrote on the older copy: %d rows, the copy had %d", got, before)
	}
	if out := runOK(t, s.env, "rebuild", "--topic", lost); !strings.Contains(out, "committed by the relay") {
		t.Fatalf("rebuild: %s\nrelay:\n%s", out, p.tail())
	}
	<-s.produced
	waitDrained(t, s.db.DSN, s.slot, 3*time.Minute)
	s.stopWithin(p, 30*time.Second)
	checkAfterRebuildWith(t, s.store, s.truth.read(t), lost, checkRestoredTopic)
}

// checkRestoredTopic: after a rebuild of a table put back from an older
// copy, each source row once: the rows the copy kept, in source commit
// order, then the rebuild's snapshot rows (those the copy lost, at the
// rebuild's txn version), then rows streamed from the pause on, in source
// commit order.
func checkRestoredTopic(t testing.TB, tp string, got []verify.Logged, want []truthRow, rec catalog.RebuildRecord) {
	t.Helper()
	pos := make(map[string]int, len(want))
	for i, r := range want {
		pos[r.ID] = i
	}
	seen := map[string]bool{}
	phase, last := 0, -1 // 0 kept, 1 snapshot, 2 streamed
	for i, g := range got {
		k, ok := pos[g.ID]
		if !ok || seen[g.ID] {
			t.Fatalf("topic %s: row %d (%s): not a source row of the topic, or twice", tp, i, g.ID)
		}
		seen[g.ID] = true
		src := want[k]
		switch {
		case g.CommitLSN == rec.TxnVersion:
			if phase == 2 {
				t.Fatalf("topic %s: snapshot row %s after rows streamed after the rebuild", tp, g.ID)
			}
			phase = 1
			continue
		case pglogrepl.LSN(g.CommitLSN) != src.CommitLSN:
			if phase != 0 {
				t.Fatalf("topic %s: first-start row %s after other rows", tp, g.ID)
			}
			continue
		case phase == 1 || phase == 2:
			if int64(src.CommitLSN) <= rec.TxnVersion {
				t.Fatalf("topic %s: %s committed at %s, before the pause, after the snapshot rows", tp, g.ID, src.CommitLSN)
			}
			if phase == 1 {
				phase, last = 2, -1
			}
		}
		if k < last {
			t.Fatalf("topic %s: row %s out of source commit order", tp, g.ID)
		}
		last = k
	}
	if len(seen) != len(want) {
		t.Errorf("topic %s: %d distinct source rows after the rebuild, %d in the source", tp, len(seen), len(want))
	}
}
