package subscribe

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// columnCollector is a Handler with Options.Columns: it reads every event
// field by field, checks Columns.Event agrees, and keeps what it read.
type columnCollector struct {
	collector
	maxBatch int
}

func (cc *columnCollector) handle(ctx context.Context, b *Batch) error {
	cs := b.Columns
	if cs == nil || len(b.Events) != 0 {
		return fmt.Errorf("batch by column: Columns %v, %d events", cs != nil, len(b.Events))
	}
	cc.maxBatch = max(cc.maxBatch, cs.Len())
	evs := make([]Event, cs.Len())
	for i := range evs {
		evs[i] = Event{Event: outbox.Event{ID: cs.ID(i), Topic: cs.Topic(i), Key: cs.Key(i), Type: cs.Type(i),
			SchemaVersion: cs.SchemaVersion(i), Payload: cs.Payload(i), Headers: cs.Headers(i), OccurredAt: cs.OccurredAt(i),
			CommitLSN: cs.CommitLSN(i), Seq: cs.Seq(i), Xid: cs.Xid(i), CommitTime: cs.CommitTime(i), Source: cs.Source(i)},
			Position: cs.Position(i), VersionTime: cs.VersionTime(i), WriterVersion: cs.SchemaVersion(i)}
	}
	for i := len(evs) - 1; i >= 0; i-- { // backwards: lookups across runs
		if e := cs.Event(i); !reflect.DeepEqual(e, evs[i]) {
			return fmt.Errorf("Columns.Event(%d) = %+v, field by field %+v", i, e, evs[i])
		}
	}
	return cc.collector.handle(ctx, &Batch{Topic: b.Topic, Group: b.Group, Events: evs, From: b.From, To: b.To})
}

// TestColumnsMatchEvents: with Options.Columns the handler reads, field by
// field, the events (and positions, batches, checkpoints) Events carries
// without it, with and without Dedup, across a failed batch that resumes
// in the middle of a chunk; what it kept still equals the files at the end.
func TestColumnsMatchEvents(t *testing.T) {
	root, want := mixedTopic(t)
	for _, dedup := range []int{0, 10_000} {
		var rows collector
		cc := columnCollector{collector: collector{failAt: 2}}
		for i, h := range []Handler{cc.handle, cc.handle, rows.handle} {
			opts := Options{BatchSize: 700, Dedup: dedup, Columns: i < 2}
			if err := Subscribe(context.Background(), root, "orders", fmt.Sprintf("g%d", dedup), h, opts); (err == nil) != (i > 0) {
				t.Fatalf("run %d: %v", i, err)
			}
			if i == 1 { // the same group, as events
				if _, err := Reset(context.Background(), root, NewStoreCheckpoints(root), "orders", fmt.Sprintf("g%d", dedup), FromVersion(0)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !reflect.DeepEqual(cc.batches, rows.batches) {
			t.Fatalf("dedup %d: batches by column %+v, as events %+v", dedup, cc.batches, rows.batches)
		}
		if len(cc.events) != len(want) {
			t.Fatalf("dedup %d: %d events, want %d", dedup, len(cc.events), len(want))
		}
		for i, e := range cc.events {
			if !reflect.DeepEqual(e.Event, want[i].Event) || e.Position != want[i].Position || !reflect.DeepEqual(e, rows.events[i]) {
				t.Fatalf("dedup %d: event %d = %+v at %v, want %+v at %v", dedup, i, e.Event, e.Position, want[i].Event, want[i].Position)
			}
		}
	}
}

// TestColumnsOfManySmallFiles: a batch by column refers to the chunks it
// spans until it is handled; over many one-event files it is handed over
// at maxHeldChunks chunks (bounded memory), every event intact. Files of
// another writer's layout (sink/topic's events) read by column as well.
func TestColumnsOfManySmallFiles(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	tt.commit(100, 1)
	data := millisFile(t)
	if err := storage.Sub(root, "orders").Put(ctx, "other.parquet", data); err != nil {
		t.Fatal(err)
	}
	tt.rawCommit(2, []delta.Action{{Add: &delta.Add{Path: "other.parquet", Size: int64(len(data)), DataChange: true, PartitionValues: map[string]*string{}}}})
	var cc columnCollector
	if err := Subscribe(ctx, root, "orders", "g", cc.handle, Options{Columns: true}); err != nil {
		t.Fatal(err)
	}
	var rows collector
	if err := Subscribe(ctx, root, "orders", "rows", rows.handle, Options{}); err != nil {
		t.Fatal(err)
	}
	if cc.maxBatch != maxHeldChunks || !reflect.DeepEqual(cc.events, rows.events) || len(rows.events) != 102 {
		t.Fatalf("largest batch by column %d (want %d); %d events by column, %d as events, equal %t",
			cc.maxBatch, maxHeldChunks, len(cc.events), len(rows.events), reflect.DeepEqual(cc.events, rows.events))
	}
}
