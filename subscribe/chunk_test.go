package subscribe

import (
	"reflect"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// TestChunkEventSetsEveryField: chunk.event assigns the fields of a reused
// batch slot one by one; a field it does not know would keep the value of
// an event delivered before.
func TestChunkEventSetsEveryField(t *testing.T) {
	if n := reflect.TypeFor[outbox.Event]().NumField(); n != len(eventColumns) {
		t.Fatalf("outbox.Event has %d fields, chunk.event sets %d: update chunk.event and eventColumns", n, len(eventColumns))
	}
	c := &chunk{n: 1, headers: []string{""}}
	for i := range eventColumns {
		c.starts[i], c.ends[i], c.nums[i] = []int32{0}, []int32{0}, []int64{0}
		c.null[i] = []bool{i == cHeaders}
	}
	h := "stale"
	e := outbox.Event{ID: "stale", Topic: "stale", Key: "stale", Type: "stale", SchemaVersion: 9, Payload: "stale", Headers: &h,
		OccurredAt: time.Now(), CommitLSN: 9, Seq: 9, Xid: 9, CommitTime: time.Now()}
	c.event(0, &e)
	if want := (outbox.Event{OccurredAt: time.UnixMicro(0).UTC(), CommitTime: time.UnixMicro(0).UTC()}); !reflect.DeepEqual(e, want) {
		t.Fatalf("a reused slot kept stale fields: %+v", e)
	}
}
