package republish

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

const source = "deltabus-7-s"

func store(t *testing.T) storage.Store {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func events(topic string, n int) []Event {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	out := make([]Event, n)
	for i := range out {
		out[i] = Event{Event: outbox.Event{ID: fmt.Sprintf("0195c1a4-7b1e-7c3d-8e9f-%012x", i), Topic: topic, Key: "k", Type: "T",
			SchemaVersion: 1, Payload: fmt.Sprintf(`{"n":%d}`, i), OccurredAt: at.Add(time.Duration(i) * time.Millisecond),
			CommitLSN: 1000 + int64(i/3), Seq: int32(i % 3), Xid: 7, CommitTime: at, Source: source}}
	}
	return out
}

func publishAll(t *testing.T, st storage.Store, evs []Event) *Result {
	t.Helper()
	res, err := Publish(context.Background(), Options{Root: st, Kind: KindRepair, Actor: "test"}, evs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// onceEach fails unless the topic holds each of ids exactly once.
func onceEach(t *testing.T, st storage.Store, topic string, evs []Event) []verify.Logged {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), st, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.ID]++
		if r.Source != source {
			t.Fatalf("event %s has source %q", r.ID, r.Source)
		}
	}
	for _, ev := range evs {
		if seen[ev.ID] != 1 {
			t.Fatalf("event %s is in %s %d times", ev.ID, topic, seen[ev.ID])
		}
	}
	if len(rows) != len(evs) {
		t.Fatalf("%s holds %d events, want %d", topic, len(rows), len(evs))
	}
	return rows
}

func TestPublishOnceKeepingPositionsAndOrder(t *testing.T) {
	st := store(t)
	evs := events("orders", 10)
	res := publishAll(t, st, evs)
	if res.Run.Republished != 10 || res.Run.State != "done" {
		t.Fatalf("run %+v", res.Run)
	}
	rows := onceEach(t, st, "orders", evs)
	for i, r := range rows {
		if r.ID != evs[i].ID || r.CommitLSN != evs[i].CommitLSN || r.Seq != evs[i].Seq {
			t.Fatalf("row %d: %+v, want %+v", i, r, evs[i].Event)
		}
	}
	again := publishAll(t, st, evs)
	if again.Run.Republished != 0 || again.Run.Present != 10 {
		t.Fatalf("second run %+v", again.Run)
	}
	onceEach(t, st, "orders", evs)
	runs, err := catalog.ListRepublishRuns(context.Background(), st, 0)
	if err != nil || len(runs) != 2 || runs[0].ID != again.Run.ID {
		t.Fatalf("runs %+v %v", runs, err)
	}
	audited := 0
	if err := ReadAudit(context.Background(), st, func(r AuditRow) error { audited++; return nil }); err != nil || audited != 20 {
		t.Fatalf("%d audit rows (%v), want 20", audited, err)
	}
}

// Events the relay's stream wrote are found present, by source and id.
func TestPublishSkipsWhatTheStreamWrote(t *testing.T) {
	st := store(t)
	evs := events("orders", 6)
	s := deltasink.New(st, deltasink.Options{AppID: source})
	b := s.NewBatch()
	for _, ev := range evs[:3] {
		e := ev.Event
		if err := b.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Commit(context.Background(), "orders", 1000); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	res := publishAll(t, st, evs)
	if res.Run.Republished != 3 || res.Run.Present != 3 {
		t.Fatalf("run %+v", res.Run)
	}
	onceEach(t, st, "orders", evs)
}

// Runs publishing overlapping events at once publish each event once.
func TestConcurrentRunsPublishOnce(t *testing.T) {
	st := store(t)
	evs := events("orders", 120)
	var wg sync.WaitGroup
	total := make([]int, 6)
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := evs[(i%3)*30 : (i%3)*30+60] // overlapping thirds
			res, err := Publish(context.Background(), Options{Root: st, Kind: KindRedrive}, part)
			if err != nil {
				t.Error(err)
				return
			}
			total[i] = res.Run.Republished
		}()
	}
	wg.Wait()
	sum := 0
	for _, n := range total {
		sum += n
	}
	if sum != 120 {
		t.Fatalf("the runs published %d events between them, want 120", sum)
	}
	onceEach(t, st, "orders", evs)
}

func TestPublishRefusesWhatTheStreamWouldRefuse(t *testing.T) {
	st := store(t)
	evs := events("orders", 3)
	evs[0].Topic = "Bad/Topic"
	evs[1].Refused = "an UPDATE of an outbox row is not an event"
	evs[2].Source = "no/source"
	res := publishAll(t, st, evs)
	if res.Run.Refused != 3 || res.Run.Republished != 0 {
		t.Fatalf("run %+v", res.Run)
	}
	for _, o := range res.Outcomes {
		if o.Status != Refused || o.Reason == "" {
			t.Fatalf("outcome %+v", o)
		}
	}
}

// A grouped topic's events go to its group's table, once, as the topic's
// rows; the republish counter is the topic's in that table.
func TestPublishIntoAGroupsTable(t *testing.T) {
	st := store(t)
	if err := catalog.WriteGroup(context.Background(), st, catalog.Group{Name: "metrics", Topics: []string{"metrics.*"}}); err != nil {
		t.Fatal(err)
	}
	cpu, mem := events("metrics.cpu", 5), events("metrics.mem", 4)
	for i := range mem {
		mem[i].ID = fmt.Sprintf("0295c1a4-7b1e-7c3d-8e9f-%012x", i)
	}
	res := publishAll(t, st, append(append([]Event{}, cpu...), mem...))
	if res.Run.Republished != 9 || len(res.Run.Topics) != 2 || res.Run.Topics[0].Table != "_group.metrics" {
		t.Fatalf("run %+v", res.Run)
	}
	onceEach(t, st, "metrics.cpu", cpu)
	onceEach(t, st, "metrics.mem", mem)
	if again := publishAll(t, st, cpu); again.Run.Present != 5 {
		t.Fatalf("second run %+v", again.Run)
	}
}
