package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

func TestCleanRunReportsNoDifferences(t *testing.T) {
	e := newEnv(t)
	orders := events("orders", 300, e.base, 3*time.Hour)
	users := events("users", 40, e.base.Add(time.Hour), time.Hour)
	e.insertSource(orders)
	e.insertSource(users)
	e.commitLog("orders", orders[:150], "deltabus-deltabus", 64)
	e.commitLog("orders", orders[150:], "deltabus-deltabus", 64)
	e.commitLog("users", users, "deltabus-deltabus", 1000)
	e.advanceSlot()

	rep := e.run(3, nil)
	if rep.ExitCode() != ExitClean {
		t.Fatalf("exit %d, want 0: %+v", rep.ExitCode(), rep.Results)
	}
	if len(rep.Results) != 6 || len(rep.Skipped) != 0 {
		t.Fatalf("%d results, %d skipped; want 6 (2 topics x 3 windows), 0", len(rep.Results), len(rep.Skipped))
	}
	var src, lg int64
	for _, r := range rep.Results {
		if r.Status != StatusClean || r.MissingCount+r.UnexpectedCount+r.DuplicateCount != 0 {
			t.Errorf("%s %s: %s, want clean with zero differences", r.Topic, r.Window, r.Status)
		}
		src += r.SourceCount
		lg += *r.LogCount
	}
	if src != 340 || lg != 340 {
		t.Fatalf("source %d log %d, want 340 each", src, lg)
	}
	v, err := Record(context.Background(), e.root, rep) // version 0 creates the table, 1 holds the rows
	if err != nil || v != 1 {
		t.Fatalf("Record: version %d, %v", v, err)
	}
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(e.root, ReconciliationTable), -1)
	if err != nil {
		t.Fatal(err)
	}
	if v2, err := Record(context.Background(), e.root, rep); err != nil || v2 != 2 {
		t.Fatalf("second Record: version %d, %v", v2, err)
	}
	if snap, err = delta.LoadSnapshot(context.Background(), storage.Sub(e.root, ReconciliationTable), -1); err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 2 || !slices.Contains(snap.Protocol.WriterFeatures, "changeDataFeed") ||
		snap.Metadata.Configuration["delta.appendOnly"] != "true" {
		t.Fatalf("reconciliation table: %d files, protocol %+v, config %v", len(snap.Files), snap.Protocol, snap.Metadata.Configuration)
	}

	// Every id compared, too.
	rep = e.run(3, func(o *Options) { o.VerifyIDs = true })
	for _, r := range rep.Results {
		if r.Status != StatusClean || r.Check != CheckIDs || r.DistinctCount == nil || *r.DistinctCount != r.SourceCount {
			t.Errorf("%s %s: %s check %s distinct %v, want clean ids with distinct = source", r.Topic, r.Window, r.Status, r.Check, r.DistinctCount)
		}
	}
}

func TestCaptureGapGivesExactMissingIDs(t *testing.T) {
	e := newEnv(t)
	before := events("orders", 400, e.base, 2*time.Hour)
	e.insertSource(before)
	// The outbox leaves the publication; rows inserted now never reach the log.
	e.db.Exec(t, `ALTER PUBLICATION deltabus DROP TABLE public.outbox`)
	gap := events("orders", 3, e.base.Add(70*time.Minute), 10*time.Minute)
	e.insertSource(gap)
	e.db.Exec(t, `ALTER PUBLICATION deltabus ADD TABLE public.outbox`)
	e.commitLog("orders", before, "deltabus-deltabus", 100)
	e.advanceSlot()

	rep := e.run(2, func(o *Options) { o.LeafRows = 40 })
	if rep.ExitCode() != ExitDivergence {
		t.Fatalf("exit %d, want 1", rep.ExitCode())
	}
	first, second := rep.Results[0], rep.Results[1]
	if first.Status != StatusClean {
		t.Errorf("first window %s, want clean", first.Status)
	}
	got := slices.Sorted(slices.Values(second.Missing))
	want := slices.Sorted(slices.Values(ids(gap)))
	if second.Status != StatusDiverged || !slices.Equal(got, want) || second.MissingCount != 3 ||
		second.UnexpectedCount != 0 || second.DuplicateCount != 0 {
		t.Fatalf("second window %s missing %v (%d), unexpected %d, dups %d; want exactly %v",
			second.Status, got, second.MissingCount, second.UnexpectedCount, second.DuplicateCount, want)
	}
	if len(second.Narrowed) == 0 || second.Check != CheckNarrow {
		t.Fatalf("window was not narrowed: check %s, narrowed %v", second.Check, second.Narrowed)
	}
	var sb strings.Builder
	if err := rep.WriteText(&sb, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), gap[0].ID) || !strings.Contains(sb.String(), "DIVERGENCE") {
		t.Fatalf("text report lacks the missing id or verdict:\n%s", sb.String())
	}
}

func TestDeletedDataFileIsUnreadableNotZero(t *testing.T) {
	e := newEnv(t)
	evs := events("orders", 200, e.base, 2*time.Hour)
	e.insertSource(evs)
	e.commitLog("orders", evs, "deltabus-deltabus", 50) // 4 files, 30 min each
	e.advanceSlot()
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(e.root, "orders"), -1)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, a := range snap.Files {
		if strings.HasPrefix(a.Path, "part-00003") { // the last file: second window
			victim = a.Path
		}
	}
	if err := storage.Sub(e.root, "orders").Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}

	rep := e.run(2, nil)
	first, second := rep.Results[0], rep.Results[1]
	if first.Status != StatusClean {
		t.Errorf("first window %s, want clean", first.Status)
	}
	if second.Status != StatusUnreadable || second.LogCount != nil || len(second.Unreadable) != 1 ||
		!strings.Contains(second.Unreadable[0], victim) {
		t.Fatalf("second window: %s, log count %v, unreadable %v; want unreadable naming %s", second.Status, second.LogCount, second.Unreadable, victim)
	}
	if rep.ExitCode() != ExitDivergence {
		t.Fatalf("exit %d, want 1", rep.ExitCode())
	}
}

func TestBatchCommittedTwiceGivesExactDuplicates(t *testing.T) {
	e := newEnv(t)
	evs := events("orders", 120, e.base, time.Hour)
	e.insertSource(evs)
	e.commitLog("orders", evs[:100], "deltabus-deltabus", 1000)
	e.commitLog("orders", evs[100:], "deltabus-deltabus", 1000)
	e.commitLog("orders", evs[100:], "deltabus-other", 1000) // the same batch again, another appId
	e.advanceSlot()

	rep := e.run(1, nil)
	r := rep.Results[0]
	var got []string
	for _, d := range r.Duplicates {
		if d.Copies != 2 {
			t.Errorf("%s has %d copies, want 2", d.ID, d.Copies)
		}
		got = append(got, d.ID)
	}
	want := slices.Sorted(slices.Values(ids(evs[100:])))
	if r.Status != StatusDiverged || !slices.Equal(slices.Sorted(slices.Values(got)), want) || r.DuplicateCount != 20 ||
		r.MissingCount != 0 || r.UnexpectedCount != 0 || r.SourceCount != 120 || *r.LogCount != 140 {
		t.Fatalf("%s: dups %v (%d), missing %d, unexpected %d, source %d log %d; want the 20 ids of the second batch",
			r.Status, got, r.DuplicateCount, r.MissingCount, r.UnexpectedCount, r.SourceCount, *r.LogCount)
	}
	if r.DistinctCount == nil || *r.DistinctCount != 120 {
		t.Fatalf("distinct %v, want 120", r.DistinctCount)
	}
}

func TestOpenWindowsAreSkipped(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.base = now.Truncate(time.Hour).Add(-time.Hour)
	evs := events("orders", 10, e.base, time.Hour)
	e.insertSource(evs)
	e.commitLog("orders", evs, "deltabus-deltabus", 1000)

	// The slot never confirms: every window is open.
	rep := e.run(1, func(o *Options) {
		o.To = now.Add(-time.Hour)
		o.From = o.To.Add(-time.Hour)
		o.DurableWait = 300 * time.Millisecond
	})
	if len(rep.Results) != 0 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0].Reason, "confirmed") {
		t.Fatalf("results %v skipped %v; want one window skipped for the slot", rep.Results, rep.Skipped)
	}
	// The slot confirms, but the last window ends within the lateness.
	e.advanceSlot()
	rep = e.run(1, func(o *Options) {
		o.From = now.Add(-90 * time.Minute)
		o.To = now.Add(-2 * time.Minute)
		o.Window = 44 * time.Minute
	})
	if len(rep.Results) != 1 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0].Reason, "lateness") {
		t.Fatalf("results %d skipped %v; want the last window skipped as open", len(rep.Results), rep.Skipped)
	}
	if rep.ExitCode() != ExitClean {
		t.Fatalf("exit %d, want 0 (skipped windows are not divergence): %+v", rep.ExitCode(), rep.Results)
	}
}

// TestOtherSourcesEventsAreNotUnexpected: a topic shared by several source
// databases holds the others' events beside this source's; the run checks
// this source's alone (by the rows' source column): the others' are
// neither unexpected nor counted, in one-source files and in files that
// compaction merged from several, and a missing event of this source is
// still found.
func TestOtherSourcesEventsAreNotUnexpected(t *testing.T) {
	e := newEnv(t)
	ours := e.db.AppID(t, "deltabus")
	evs := events("orders", 200, e.base, time.Hour)
	others := events("orders", 150, e.base, time.Hour)
	e.insertSource(evs)
	e.commitLogAs("orders", evs[:100], ours, ours, 40)
	e.commitLogAs("orders", others, "deltabus-99-deltabus", "deltabus-99-deltabus", 40)
	e.commitLogAs("orders", evs[101:], ours, ours, 1000) // evs[100] lost
	if _, err := topic.Compact(context.Background(), storage.Sub(e.root, "orders"), topic.CompactOptions{MinFiles: 2}); err != nil {
		t.Fatal(err)
	}
	e.advanceSlot()
	rep := e.run(1, nil)
	var missing []string
	for _, r := range rep.Results {
		if r.UnexpectedCount != 0 || r.DuplicateCount != 0 {
			t.Fatalf("%s: %d unexpected, %d duplicates: another source's events counted as this one's", r.Window, r.UnexpectedCount, r.DuplicateCount)
		}
		missing = append(missing, r.Missing...)
	}
	if !slices.Equal(missing, []string{evs[100].ID}) {
		t.Fatalf("missing %q, want exactly %s", missing, evs[100].ID)
	}
	if rep.AppID != ours {
		t.Fatalf("report names source %q, want %q", rep.AppID, ours)
	}
}
