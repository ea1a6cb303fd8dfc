package outbox

import (
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// A dead letter the stream's Router made of a row, routed again from its
// raw row with a fixed mapping, is the event the stream would have made:
// the same id, fields, commit position and seq.
func TestRowRouterRoutesADeadLettersRowAgain(t *testing.T) {
	rel := &decoding.Relation{ID: 1, Namespace: "app", Name: "events", Columns: []decoding.Column{
		{Name: "id", TypeOID: oidUUID}, {Name: "topic", TypeOID: oidText}, {Name: "aggregate", TypeOID: oidText},
		{Name: "type", TypeOID: oidText}, {Name: "payload", TypeOID: oidJSONB}, {Name: "created", TypeOID: oidTimestamp},
	}}
	tuple := []decoding.Datum{txt("0195C1A4-7B1E-7C3D-8E9F-0A1B2C3D4E5F"), txt("orders"), txt("order-42"), txt("OrderPlaced"),
		txt(`{"total": 12.5}`), txt("2026-11-30 08:48:59.123456")}
	wrong := Mappings{Default: Mapping{ID: "id", Topic: "topic", Key: "key", Type: "type", Payload: "payload", OccurredAt: "created"}}
	_, dl, err := NewRouter(wrong).Route(newRow(rel, decoding.OpInsert, tuple))
	if err != nil || dl == nil {
		t.Fatalf("the wrong mapping made no dead letter: %v", err)
	}
	fixed := Mappings{Default: Mapping{ID: "id", Topic: "topic", Key: "aggregate", Type: "type", Payload: "payload", OccurredAt: "created"}}
	want, _, _ := NewRouter(fixed).Route(newRow(rel, decoding.OpInsert, tuple))

	cols, err := ParseRawRow(dl.RawRow)
	if err != nil {
		t.Fatal(err)
	}
	rr := NewRowRouter(fixed)
	got, again := rr.Route(dl.SourceTable, cols, RowTxn{CommitLSN: dl.CommitLSN, Seq: dl.Seq, Xid: dl.Xid, CommitTime: dl.CommitTime})
	if again != nil {
		t.Fatalf("routed again: %s", again.Reason)
	}
	checkEvent(t, got, *want)

	// Still wrong: the same reason as the stream's.
	_, still := NewRowRouter(wrong).Route(dl.SourceTable, cols, RowTxn{CommitLSN: dl.CommitLSN, Seq: dl.Seq, CommitTime: dl.CommitTime})
	if still == nil || still.Reason != dl.Reason || still.ID != dl.ID {
		t.Fatalf("routed with the wrong mapping: %+v, want the dead letter %+v", still, dl)
	}
}

func TestParseRawRowKeepsEveryKindOfValue(t *testing.T) {
	cols, err := ParseRawRow(`{"a":"x","b":null,"c":{"unchanged_toast":true},"d":{"binary_base64":"AAE="},"e":3}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) != 5 || cols[0].Name != "a" || *cols[0].Text != "x" || cols[1].Text != nil || !cols[2].Unchanged ||
		string(cols[3].Binary) != "\x00\x01" || *cols[4].Text != "3" {
		t.Fatalf("columns %+v", cols)
	}
	if _, err := ParseRawRow(`[1]`); err == nil {
		t.Fatal("a raw row that is not an object was read")
	}
}

func TestRowRouterReadsOccurredAtWithOrWithoutZone(t *testing.T) {
	rr := NewRowRouter(Mappings{Default: Mapping{ID: "id", Topic: "topic", Key: "key", Type: "type", Payload: "payload", OccurredAt: "occurred_at"}})
	for _, v := range []string{"2026-11-30 07:48:59.5+00", "2026-11-30 07:48:59.5"} {
		cols := []RawColumn{{Name: "id", Text: ptr("0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f")}, {Name: "topic", Text: ptr("t")},
			{Name: "key", Text: ptr("k")}, {Name: "type", Text: ptr("T")}, {Name: "payload", Text: ptr("{}")}, {Name: "occurred_at", Text: ptr(v)}}
		ev, dl := rr.Route("public.outbox", cols, RowTxn{CommitTime: commitTime})
		if dl != nil || !ev.OccurredAt.Equal(time.Date(2026, 11, 30, 7, 48, 59, 5e8, time.UTC)) {
			t.Fatalf("occurred_at %q: %+v %+v", v, ev, dl)
		}
	}
}

func ptr(s string) *string { return &s }
