package bootstrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// TestRecordForkIsRepeatable: the topics hold this source's events up to
// 0x302 and the source forked at 0x200. The fork record names exactly the
// events at or past the fork, the new epoch lifts the fork above 0x302,
// and a run that dies between the fork record and the marker, done again
// from the old marker, records the same phantoms (not none, for being
// "known" from its own first record). Another source's events past the
// fork are not this source's phantoms.
func TestRecordForkIsRepeatable(t *testing.T) {
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const appID = "deltabus-1-s"
	commitEvents(ctx, t, store, appID, 1, 0x100, 0x200, 0x300)
	commitEvents(ctx, t, store, "deltabus-2-s", 100, 0x500)
	src := catalog.Source{SystemID: "1", Database: "app", Slot: "s"}
	m := catalog.Marker{AppID: appID, Slot: "s", SystemID: "1", Database: "app", Timeline: 1}
	id := catalog.Identity{Source: src, AppID: appID, Marker: &m}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var first []string
	for run := 0; run < 2; run++ {
		got, err := recordFork(ctx, store, id, m, 2, 0x200, log)
		if err != nil {
			t.Fatal(err)
		}
		if got.Timeline != 2 || len(got.Epochs) != 1 || got.Epochs[0].Offset != 0x302+1-0x200 {
			t.Fatalf("run %d: marker %+v, want timeline 2 and one epoch lifting 0/200 to 0x303", run, got)
		}
		forks, err := catalog.ListForks(ctx, store)
		if err != nil || len(forks) != 1 {
			t.Fatalf("run %d: forks %+v %v", run, forks, err)
		}
		ids := forks[0].Phantoms["orders"].IDs
		slices.Sort(ids)
		if len(ids) != 6 || forks[0].Count() != 6 || forks[0].Highest != 0x302 {
			t.Fatalf("run %d: %d phantoms (%v), highest %#x; want the 6 events at or past 0/200", run, len(ids), ids, forks[0].Highest)
		}
		if run == 0 {
			first = ids
		} else if !slices.Equal(ids, first) {
			t.Fatalf("a repeated run recorded %v, the first %v", ids, first)
		}
	}
}

// commitEvents commits, for each lsn, three events of topic orders at
// lsn, lsn+1 and lsn+2, as appID, in one commit at position lsn+2.
func commitEvents(ctx context.Context, t *testing.T, store storage.Store, appID string, idBase int, lsns ...pglogrepl.LSN) {
	t.Helper()
	s := deltasink.New(store, deltasink.Options{AppID: appID})
	defer s.Close(ctx)
	tp, err := s.Open(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0).UTC()
	for i, lsn := range lsns {
		b := s.NewBatch()
		for j := range 3 {
			n := idBase + 3*i + j
			ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: "orders", Key: "k", Type: "t",
				SchemaVersion: 1, Payload: `{}`, OccurredAt: at, CommitLSN: int64(lsn) + int64(j), CommitTime: at}
			if err := b.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Commit(ctx, tp.Table, int64(lsn)+2); err != nil {
			t.Fatal(err)
		}
	}
}
