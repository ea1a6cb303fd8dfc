package deadletter

import (
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

const id = "0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f"

func refused() *outbox.DeadLetter {
	ev := outbox.Event{ID: id, Topic: "orders", Key: "k", Type: "Placed", SchemaVersion: 2, Payload: `{"n":1}`,
		OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), CommitLSN: 99, Seq: 4, Xid: 7, CommitTime: time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)}
	dl := outbox.Refused(&ev, `topic "orders" type "Placed" has no contract version 2`, "public.outbox")
	dl.Source = "deltabus-1-s"
	return dl
}

// The candidate of each kind of dead letter: a refused event whole, an
// UPDATE never, a redacted one never, a row the router refused routed
// again with today's mapping.
func TestCandidates(t *testing.T) {
	rr := outbox.NewRowRouter(outbox.Mappings{})
	c := candidate(rr, refused())
	if c.Refused != "" || c.ID != id || c.Source != "deltabus-1-s" || c.CommitLSN != 99 || c.Seq != 4 || c.Payload != `{"n":1}` {
		t.Fatalf("a refused event's candidate: %+v", c)
	}

	upd := refused()
	upd.Reason = outbox.ReasonUpdate + "; more"
	if c := candidate(rr, upd); !strings.Contains(c.Refused, "UPDATE") {
		t.Fatalf("an UPDATE's candidate: %+v", c)
	}

	red := refused()
	red.RawRow = `{"id":"x","payload":"[redacted]","schema_version":2,"redacted":true}`
	if c := candidate(rr, red); !strings.Contains(c.Refused, "redacted") {
		t.Fatalf("a redacted dead letter's candidate: %+v", c)
	}

	row := &outbox.DeadLetter{Event: outbox.Event{ID: "dl-0000000000000063-4", CommitLSN: 99, Seq: 4, CommitTime: time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC), Source: "deltabus-1-s"},
		Reason: "NULL key in column \"key\"", SourceTable: "public.outbox",
		RawRow: `{"id":"` + id + `","topic":"orders","key":null,"type":"Placed","schema_version":"1","payload":"{}","headers":null,"occurred_at":"2026-12-01 10:00:00+00","aggregate":"a-1"}`}
	if c := candidate(rr, row); c.Refused == "" || !strings.Contains(c.Refused, "NULL key") {
		t.Fatalf("a row the mapping still refuses: %+v", c)
	}
	fixed := outbox.NewRowRouter(outbox.Mappings{Default: outbox.Mapping{ID: "id", Topic: "topic", Key: "aggregate", Type: "type",
		SchemaVersion: "schema_version", Payload: "payload", Headers: "headers", OccurredAt: "occurred_at"}})
	c = candidate(fixed, row)
	if c.Refused != "" || c.ID != id || c.Key != "a-1" || c.Source != "deltabus-1-s" || c.CommitLSN != 99 || c.Seq != 4 {
		t.Fatalf("a row routed again with its fixed mapping: %+v", c)
	}
}
