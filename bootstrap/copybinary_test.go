package bootstrap

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestBinRowsParsesAcrossSplits feeds a COPY binary stream in every
// possible two-piece split (and byte by byte) and checks values and NULLs.
func TestBinRowsParsesAcrossSplits(t *testing.T) {
	stream := append([]byte{}, binCopySignature...)
	stream = append(stream, 0, 0, 0, 0, 0, 0, 0, 2, 'x', 'y') // flags, 2 bytes of extension
	tuple := func(vals ...[]byte) {
		stream = append(stream, 0, byte(len(vals)))
		for _, v := range vals {
			if v == nil {
				stream = append(stream, 0xff, 0xff, 0xff, 0xff)
				continue
			}
			stream = append(stream, 0, 0, 0, byte(len(v)))
			stream = append(stream, v...)
		}
	}
	tuple([]byte("ab"), nil, []byte{})
	tuple([]byte("c"), []byte("de"), []byte("f"))
	stream = append(stream, 0xff, 0xff)
	want := "[ab <NULL> ] [c de f] "
	parse := func(pieces [][]byte) (string, error) {
		got := ""
		c := newBinRows(3, func(ds []decoding.Datum) error {
			row := make([]string, len(ds))
			for i, d := range ds {
				switch {
				case d.Kind == decoding.DatumNull:
					row[i] = "<NULL>"
				case d.Kind == decoding.DatumBinary && d.Data != nil:
					row[i] = string(d.Data)
				default:
					t.Fatalf("datum %+v", d)
				}
			}
			got += fmt.Sprint(row) + " "
			return nil
		})
		for _, p := range pieces {
			if _, err := c.Write(p); err != nil {
				return got, err
			}
		}
		return got, c.finish()
	}
	for split := 0; split <= len(stream); split++ {
		got, err := parse([][]byte{stream[:split], stream[split:]})
		if err != nil || got != want {
			t.Fatalf("split %d: got %q, %v; want %q", split, got, err, want)
		}
	}
	var bytewise [][]byte
	for i := range stream {
		bytewise = append(bytewise, stream[i:i+1])
	}
	if got, err := parse(bytewise); err != nil || got != want {
		t.Fatalf("byte by byte: got %q, %v", got, err)
	}
	if _, err := parse([][]byte{stream[:len(stream)-2]}); err == nil {
		t.Error("stream without its end marker accepted")
	}
	if _, err := parse([][]byte{[]byte("PGCOPY\n\xff\r\n\x01\x00\x00\x00\x00\x00\x00\x00\x00")}); err == nil {
		t.Error("bad signature accepted")
	}
}

// trickyRows are outbox rows that test every branch of the fast path and
// of the Router: good rows, every way a row becomes a dead letter, and
// values whose text forms are unusual.
var trickyRows = []string{
	`'topic-a', 'k', 't', 1, '{"a":1}', NULL, '2026-01-01 00:00:00+00'`,
	`'topic-a', 'k', 't', 7, '{"b":"x\ty"}', '{"h":[1,2]}', '2026-01-01 00:00:00.000001+00'`,
	`'topic-a', '', '', NULL, '[]', '{}', NULL`,
	`'topic-a', 'ключ', 'typ', -2147483648, '"s"', 'null', '0001-01-01 00:00:00+00'`,
	`'topic-a', 'k', 't', 2147483647, '1', NULL, '9999-12-31 23:59:59.999999+00'`,
	`'topic-a', 'k', 't', 1, '{}', NULL, 'infinity'`,
	`'topic-a', 'k', 't', 1, '{}', NULL, '-infinity'`,
	`'topic-a', 'k', 't', 1, '{}', NULL, '0044-03-15 12:00:00.5+00 BC'`,
	`'topic-a', 'k', 't', 1, '{}', NULL, '12345-06-07 08:09:10.1+00'`,
	`'topic-a', 'k', 't', 1, '{}', NULL, '1999-12-31 23:59:59.999999+00'`,
	`'Topic-A', 'k', 't', 1, '{}', NULL, now()`,
	`'_dead', 'k', 't', 1, '{}', NULL, now()`,
	`'a/b', 'k\n', E't\\\t', 1, '{}', NULL, now()`,
	`'', 'k', 't', 1, '{}', NULL, now()`,
	`'topic-a', NULL, 't', 1, '{}', NULL, now()`,
	`'topic-a', 'k', NULL, 1, '{}', NULL, now()`,
	`'topic-a', 'k', 't', 1, NULL, NULL, now()`,
	`NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
}

// TestBinaryPathMatchesTextPath reads tricky rows of a DeltaBus outbox
// (constraints dropped so that poison rows exist) and of a custom table
// (text payload, int8 schema_version, timestamp without zone) three ways:
// through a pgoutput slot, with text COPY and with binary COPY. The text
// tuples must equal the streamed ones, the binary tuples converted to text
// must equal them too (so rows the fast path leaves to the Router become
// the same events or dead letters, same reason and raw row, as streamed
// rows), and every row the fast path builds must be the Router's event.
func TestBinaryPathMatchesTextPath(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `ALTER TABLE outbox DROP CONSTRAINT outbox_pkey`)
	db.Exec(t, `ALTER TABLE outbox ALTER id DROP NOT NULL, ALTER topic DROP NOT NULL, ALTER key DROP NOT NULL,
		ALTER type DROP NOT NULL, ALTER schema_version DROP NOT NULL, ALTER payload DROP NOT NULL, ALTER occurred_at DROP NOT NULL`)
	db.Exec(t, `CREATE TABLE custom (id uuid, topic varchar(200), key text, type bpchar(6), version bigint,
		payload text, headers json, occurred_at timestamp, flag bool, n smallint, name name)`)
	db.Exec(t, `ALTER PUBLICATION deltabus ADD TABLE custom`)
	repl, err := pgconn.Connect(ctx, db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())
	if _, err := pglogrepl.CreateReplicationSlot(ctx, repl, "tricky", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range trickyRows {
		db.Exec(t, `INSERT INTO outbox (id, topic, key, type, schema_version, payload, headers, occurred_at)
			VALUES (`+idFor(i)+`, `+r+`)`)
		db.Exec(t, `INSERT INTO custom VALUES (`+idFor(i)+`, `+r+`, true, -3, 'nm')`)
	}
	for _, r := range []string{
		`gen_random_uuid(), 'topic-a', 'k', 't', 4294967296, '{"x":1}', '{}', '2026-01-01 00:00:00', false, 1, 'n'`,
		`gen_random_uuid(), 'topic-a', 'k', 't', 3, '{bad json', '{}', '2026-01-01 00:00:00', false, 1, 'n'`,
		`gen_random_uuid(), 'topic-a', 'k', 't', 3, '{"ok":true}', '{}', '2026-01-01 00:00:00.25', NULL, NULL, NULL`,
	} {
		db.Exec(t, `INSERT INTO custom VALUES (`+r+`)`)
	}
	db.Exec(t, `SELECT pg_logical_emit_message(false, 'tricky-end', '')`)
	streamed := streamTuples(ctx, t, repl, "tricky")
	ms := outbox.Mappings{Default: outbox.DeltaBusMapping(), Tables: map[string]outbox.Mapping{
		"public.custom": {ID: "id", Topic: "topic", Key: "key", Type: "type", SchemaVersion: "version",
			Payload: "payload", Headers: "headers", OccurredAt: "occurred_at"},
	}}
	srcs, err := publishedSources(ctx, conn, "deltabus", ms)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 {
		t.Fatalf("%d sources", len(srcs))
	}
	for _, s := range srcs {
		if s.kinds == nil || s.fast == nil {
			t.Fatalf("%s: not read in binary with the fast path", s.qualified())
		}
		sel := s.selectSQ + " ORDER BY ctid"
		var text [][]decoding.Datum
		tp := newCopyRows(len(s.rel.Columns), func(d []decoding.Datum) error {
			text = append(text, detach(d))
			return nil
		})
		if _, err := conn.PgConn().CopyTo(ctx, tp, "COPY ("+sel+") TO STDOUT"); err != nil {
			t.Fatal(err)
		}
		// The text COPY path reads what the stream sends.
		if st := streamed[s.rel.Name]; !reflect.DeepEqual(st, text) {
			t.Fatalf("%s: text COPY\n%q\nstreamed\n%q", s.qualified(), text, st)
		}
		router, fastRouted, i := outbox.NewRouter(ms), 0, 0
		conv := binTextRow{kinds: s.kinds}
		var fast fastRow
		takenAt := time.Date(2026, 2, 3, 4, 5, 6, 789123456, time.UTC)
		bp := newBinRows(len(s.rel.Columns), func(d []decoding.Datum) error {
			want := text[i]
			row := decoding.Row{Relation: s.rel, Op: decoding.OpInsert, CommitLSN: 1234, CommitTime: takenAt, Seq: i, New: want}
			wantEv, wantDL, err := router.Route(&row)
			if err != nil {
				t.Fatal(err)
			}
			fast.ev = outbox.Event{CommitLSN: 1234, Seq: int32(i), CommitTime: takenAt.Truncate(time.Microsecond)}
			if s.fast.build(d, &fast) {
				fastRouted++
				if wantEv == nil {
					t.Errorf("%s row %d: fast path built an event, the Router a dead letter: %s", s.qualified(), i, wantDL.Reason)
				} else if got := fast.ev; !reflect.DeepEqual(got, *wantEv) || got.OccurredAt != wantEv.OccurredAt {
					t.Errorf("%s row %d: fast event\n%+v\nRouter event\n%+v", s.qualified(), i, got, *wantEv)
				} else if k, _ := eventKey(wantEv.ID); k != fast.key {
					t.Errorf("%s row %d: key %x, want %x", s.qualified(), i, fast.key, k)
				}
			}
			got, err := conv.convert(d)
			if err != nil {
				t.Fatalf("%s row %d: %v", s.qualified(), i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s row %d: binary as text\n%q\ntext COPY\n%q", s.qualified(), i, texts(got), texts(want))
			}
			i++
			return nil
		})
		if _, err := conn.PgConn().CopyTo(ctx, bp, "COPY ("+sel+") TO STDOUT (FORMAT binary)"); err != nil {
			t.Fatal(err)
		}
		if err := bp.finish(); err != nil {
			t.Fatal(err)
		}
		st := router.Stats()
		t.Logf("%s: %d rows, %d events (%d by the fast path), %d dead letters", s.qualified(), i, st.Events, fastRouted, st.DeadLetters)
		if i != len(text) || fastRouted == 0 || st.DeadLetters == 0 {
			t.Errorf("%s: %d binary rows, %d text rows", s.qualified(), i, len(text))
		}
	}
	// A session that does not show UTC reads timestamptz tables in text.
	if _, err := conn.Exec(ctx, "SET TIME ZONE 'Europe/Berlin'"); err != nil {
		t.Fatal(err)
	}
	if srcs, err = publishedSources(ctx, conn, "deltabus", ms); err != nil {
		t.Fatal(err)
	}
	if srcs[0].kinds == nil || srcs[1].kinds != nil {
		t.Errorf("TimeZone Europe/Berlin: custom (timestamp) binary %t, outbox (timestamptz) binary %t; want true, false",
			srcs[0].kinds != nil, srcs[1].kinds != nil)
	}
}

// streamTuples reads slot through pgoutput until the message tricky-end
// and returns the new tuples of the inserts by table name.
func streamTuples(ctx context.Context, t *testing.T, conn *pgconn.PgConn, slot string) map[string][][]decoding.Datum {
	err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{
		"proto_version '1'", "publication_names 'deltabus'", "messages 'true'"}})
	if err != nil {
		t.Fatal(err)
	}
	dec := decoding.NewDecoder()
	out := map[string][][]decoding.Datum{}
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
			if m.Prefix == "tricky-end" {
				return out
			}
		case *decoding.Row:
			if m.Op == decoding.OpInsert {
				out[m.Relation.Name] = append(out[m.Relation.Name], detach(m.New))
			}
		}
	}
}

func idFor(i int) string {
	if i == len(trickyRows)-1 {
		return "NULL"
	}
	return fmt.Sprintf("'%08x-0000-4000-8000-%012x'", i*0x01010101, i)
}

func detach(d []decoding.Datum) []decoding.Datum {
	out := make([]decoding.Datum, len(d))
	for i, x := range d {
		out[i] = x
		if x.Data != nil {
			out[i].Data = append([]byte{}, x.Data...)
		}
	}
	return out
}

func texts(d []decoding.Datum) []string {
	out := make([]string, len(d))
	for i, x := range d {
		out[i] = string(x.Kind) + ":" + string(x.Data)
	}
	return out
}

// TestFastRowValidTopic: interleaved topics are checked once each (while
// fewer than maxValidTopics), an invalid one is refused every time, and
// the accepted topic becomes the last one, copied out of the row.
func TestFastRowValidTopic(t *testing.T) {
	var r fastRow
	buf := []byte("topic-a")
	for range 3 {
		for _, topic := range []string{"topic-a", "Topic-A", "topic-b", "", "_dead", "topic-a"} {
			want := outbox.ValidTopic(topic) == nil
			if got := r.validTopic(topic); got != want {
				t.Fatalf("validTopic(%q) = %t, want %t", topic, got, want)
			}
			if want && r.lastTopic != topic {
				t.Fatalf("after %q the last topic is %q", topic, r.lastTopic)
			}
		}
	}
	if len(r.valid) != 2 {
		t.Errorf("%d topics remembered, want 2: %v", len(r.valid), r.valid)
	}
	if !r.validTopic(aliasString(buf)) {
		t.Fatal("topic-a refused")
	}
	copy(buf, "xxxxxxx")
	if r.lastTopic != "topic-a" {
		t.Errorf("the last topic aliases the row: %q", r.lastTopic)
	}
	for i := range maxValidTopics + 10 {
		if topic := fmt.Sprint("t-", i); !r.validTopic(topic) || r.lastTopic != topic {
			t.Fatalf("validTopic(%q) refused or not last (%q)", topic, r.lastTopic)
		}
	}
	if len(r.valid) != maxValidTopics {
		t.Errorf("%d topics remembered, want at most %d", len(r.valid), maxValidTopics)
	}
}
