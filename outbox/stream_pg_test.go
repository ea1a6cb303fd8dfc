package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

const endPrefix = "outbox-test-end"

// routeStream reads slot through pgoutput, decodes every message and
// routes every row, until the end marker.
func routeStream(t *testing.T, conn *pgconn.PgConn, slot string, r *outbox.Router) ([]*outbox.Event, []*outbox.DeadLetter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{
		"proto_version '1'", "publication_names 'deltabus'", "messages 'true'"}})
	if err != nil {
		t.Fatal(err)
	}
	dec := decoding.NewDecoder()
	var evs []*outbox.Event
	var dls []*outbox.DeadLetter
	for {
		raw, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		cd, ok := raw.(*pgproto3.CopyData)
		if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			t.Fatal(err)
		}
		msg, err := dec.Decode(xld.WALData)
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *decoding.LogicalMessage:
			if m.Prefix == endPrefix {
				return evs, dls
			}
		case *decoding.Row:
			ev, dl, err := r.Route(m)
			if err != nil {
				t.Fatal(err)
			}
			if ev != nil {
				evs = append(evs, ev)
			}
			if dl != nil {
				dls = append(dls, dl)
			}
		}
	}
}

// TestRouteRealStream writes events with Write, then poison rows, an
// UPDATE and a DELETE, and routes what a pgoutput slot delivers.
func TestRouteRealStream(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := context.Background(), db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	repl, err := pgconn.Connect(ctx, db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())
	if _, err := pglogrepl.CreateReplicationSlot(ctx, repl, "route", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	big := make([]string, 400) // ~13 kB of random text: stored out of line (TOAST), not compressible inline
	for i := range big {
		big[i] = outbox.NewID()
	}
	events := make([]outbox.NewEvent, 50)
	for i := range events {
		events[i] = outbox.NewEvent{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprint(i % 3), Type: "OrderPlaced",
			Payload: map[string]any{"i": i}, OccurredAt: time.Date(2026, 11, 30, 7, 48, 59, i*1000, time.UTC)}
	}
	events[7].Payload = map[string]any{"i": 7, "big": big}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, events...) }); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO public.outbox (topic, key, type, payload) VALUES ('Bad/Topic', 'k', 'T', '{}')`)
	db.Exec(t, `UPDATE public.outbox SET type = 'Changed' WHERE id = $1`, events[7].ID)
	db.Exec(t, `DELETE FROM public.outbox WHERE id = $1`, events[0].ID)
	db.Exec(t, `SELECT pg_logical_emit_message(false, '`+endPrefix+`', '')`)

	r := outbox.NewRouter(outbox.Mappings{})
	evs, dls := routeStream(t, repl, "route", r)
	if len(evs) != len(events) {
		t.Fatalf("%d events, want %d", len(evs), len(events))
	}
	for i, ev := range evs {
		e := events[i]
		var p map[string]any
		if ev.ID != e.ID || ev.Topic != e.Topic || ev.Key != e.Key || int(ev.Seq) != i || ev.CommitLSN != evs[0].CommitLSN ||
			!ev.OccurredAt.Equal(e.OccurredAt) || json.Unmarshal([]byte(ev.Payload), &p) != nil || p["i"] != float64(i) {
			t.Fatalf("event %d = %+v, wrote %+v", i, ev, e)
		}
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2 (bad topic, update)", len(dls))
	}
	if want := `invalid topic name "Bad/Topic" in column "topic": uppercase letter 'B' at offset 0; topic names are lowercase`; dls[0].Reason != want {
		t.Errorf("bad topic reason %q", dls[0].Reason)
	}
	upd := dls[1]
	wantUpd := outbox.ReasonUpdate + `; column "payload" (payload) is an unchanged TOAST value: not sent, so unknown`
	if upd.ID != events[7].ID || upd.Type != "Changed" || upd.Reason != wantUpd || upd.CommitLSN <= evs[0].CommitLSN {
		t.Errorf("update dead letter: id %s type %s lsn %d reason %q", upd.ID, upd.Type, upd.CommitLSN, upd.Reason)
	}
	if s := r.Stats(); s != (outbox.RouteStats{Events: 50, DeadLetters: 2, Updates: 1, Deletes: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}
