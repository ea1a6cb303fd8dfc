package topic

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// base is a fixed instant with a sub-millisecond part, so stats rounding is
// exercised by every test.
var base = time.Date(2026, 11, 30, 7, 48, 59, 123_456_000, time.UTC)

// testEvents returns n events in (commit_lsn, seq) order, grouped into
// source transactions of txSize rows starting at LSN lsn0.
func testEvents(n, txSize int, lsn0 int64) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		tx := int64(i / txSize)
		var headers *string
		if i%3 != 0 {
			h := fmt.Sprintf(`{"traceparent":"00-%032x-%016x-01","n":{"nested":[%d]}}`, i, i, i)
			headers = &h
		}
		evs[i] = outbox.Event{
			ID:            fmt.Sprintf("00000000-0000-4000-8000-%012d", lsn0+int64(i)),
			Topic:         "orders",
			Key:           fmt.Sprintf("order-%d", i%17),
			Type:          "OrderPlaced",
			SchemaVersion: int32(1 + i%2),
			Payload:       fmt.Sprintf(`{"i":%d,"name":"ünïcødé \"quoted\"","amount":%d.25}`, i, i*3),
			Headers:       headers,
			OccurredAt:    base.Add(time.Duration(i) * 1001 * time.Microsecond),
			CommitLSN:     lsn0 + tx*0x100,
			Seq:           int32(i % txSize),
			Xid:           1000 + tx,
			CommitTime:    base.Add(time.Duration(tx)*time.Millisecond + 7*time.Microsecond),
		}
	}
	return evs
}

func newLocalStore(t testing.TB) storage.Store {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// writeEvents writes evs with one FileWriter and returns the adds.
func writeEvents(t testing.TB, st storage.Store, opts FileOptions, evs []outbox.Event) []delta.Add {
	t.Helper()
	w := NewFileWriter(st, opts)
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	return adds
}

// readAll reads every add back with ReadEvents, in add order.
func readAll(t testing.TB, st storage.Store, adds []delta.Add) []outbox.Event {
	t.Helper()
	var got []outbox.Event
	for _, a := range adds {
		err := ReadEvents(context.Background(), st, a, func(e outbox.Event) error {
			got = append(got, e)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func eventsEqual(a, b outbox.Event) bool {
	if (a.Headers == nil) != (b.Headers == nil) || (a.Headers != nil && *a.Headers != *b.Headers) {
		return false
	}
	a.Headers, b.Headers = nil, nil
	return a.ID == b.ID && a.Topic == b.Topic && a.Key == b.Key && a.Type == b.Type &&
		a.SchemaVersion == b.SchemaVersion && a.Payload == b.Payload &&
		a.OccurredAt.Equal(b.OccurredAt) && a.CommitLSN == b.CommitLSN && a.Seq == b.Seq &&
		a.Xid == b.Xid && a.CommitTime.Equal(b.CommitTime)
}
