package decoding

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

var (
	commitTime = time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)
	uuid1      = "4b7e3f0c-8c8e-4f0e-9c55-0d9f7f3c2a11"
	uuid2      = "9d2a1c44-1e7b-4a44-b0b4-6f0c7a9e5b22"
)

func mustDecode(t *testing.T, d *Decoder, msg []byte) Message {
	t.Helper()
	m, err := d.Decode(msg)
	if err != nil {
		t.Fatalf("decode %q: %v", msg[0], err)
	}
	return m
}

// TestDecodeTransaction decodes a transaction of every row kind, with new
// rows and with reused ones (ReuseRows): each row is checked before the
// next message is decoded.
func TestDecodeTransaction(t *testing.T) {
	t.Run("new rows", func(t *testing.T) { testDecodeTransaction(t, false) })
	t.Run("reused rows", func(t *testing.T) { testDecodeTransaction(t, true) })
}

func testDecodeTransaction(t *testing.T, reuse bool) {
	d := NewDecoder()
	if reuse {
		d.ReuseRows()
	}
	outbox, other := outboxRelation(16390), &Relation{ID: 16400, Namespace: "app", Name: "orders",
		Columns: []Column{{Name: "id", TypeOID: 20, TypeMod: -1, Key: true}, {Name: "note", TypeOID: 25, TypeMod: -1}}}
	for _, msg := range [][]byte{encRelation(outbox), encRelation(other), encType(16500, "app", "mood"), encOrigin(0x99, "up")} {
		if m := mustDecode(t, d, msg); m != nil {
			t.Fatalf("state message yielded %#v", m)
		}
	}
	begin := mustDecode(t, d, encBegin(0x16B3748, commitTime, 771))
	if want := (&Begin{Xid: 771, CommitLSN: 0x16B3748, CommitTime: commitTime}); !reflect.DeepEqual(begin, want) {
		t.Fatalf("begin = %#v, want %#v", begin, want)
	}
	tup1, tup2 := outboxTuple(uuid1, "orders", `{"a":1}`), outboxTuple(uuid2, "billing", `{"b":"é \"q\""}`)
	msgs := [][]byte{
		encInsert(16390, tup1...),
		encInsert(16400, text("42"), null),
		encMessage(true, 0x16B3700, "deltabus", []byte("hello")),
		encInsert(16390, tup2...),
		encUpdate(16400, 'K', []Datum{text("42"), null}, []Datum{text("43"), unchanged}),
		encUpdate(16400, 0, nil, []Datum{text("43"), text("n")}),
		encDelete(16400, 'K', text("43"), null),
	}
	ctx := Row{Xid: 771, CommitLSN: 0x16B3748, CommitTime: commitTime}
	wants := []Message{
		&Row{Relation: outbox, Op: OpInsert, Seq: 0, New: tup1},
		&Row{Relation: other, Op: OpInsert, Seq: 1, New: []Datum{text("42"), null}},
		&LogicalMessage{Transactional: true, LSN: 0x16B3700, Prefix: "deltabus", Content: []byte("hello")},
		&Row{Relation: outbox, Op: OpInsert, Seq: 2, New: tup2},
		&Row{Relation: other, Op: OpUpdate, Seq: 3, Old: []Datum{text("42"), null}, New: []Datum{text("43"), unchanged}},
		&Row{Relation: other, Op: OpUpdate, Seq: 4, New: []Datum{text("43"), text("n")}},
		&Row{Relation: other, Op: OpDelete, Seq: 5, Old: []Datum{text("43"), null}},
	}
	for i, msg := range msgs {
		got := mustDecode(t, d, msg)
		want := wants[i]
		if r, ok := want.(*Row); ok {
			r.Xid, r.CommitLSN, r.CommitTime = ctx.Xid, ctx.CommitLSN, ctx.CommitTime
			if got.(*Row).Relation != r.Relation && !reflect.DeepEqual(got.(*Row).Relation, r.Relation) {
				t.Fatalf("message %d: relation %+v, want %+v", i, got.(*Row).Relation, r.Relation)
			}
			r.Relation = got.(*Row).Relation
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
	commit := mustDecode(t, d, encCommit(0x16B3748, 0x16B3778, commitTime))
	if want := (&Commit{CommitLSN: 0x16B3748, EndLSN: 0x16B3778, CommitTime: commitTime}); !reflect.DeepEqual(commit, want) {
		t.Fatalf("commit = %#v, want %#v", commit, want)
	}
	if d.InTransaction() {
		t.Fatal("still in a transaction after Commit")
	}
	// Seq restarts with the next transaction; a non-transactional message may
	// arrive between transactions.
	if m := mustDecode(t, d, encMessage(false, 0x16B3800, "p", nil)).(*LogicalMessage); m.Transactional || m.Prefix != "p" || len(m.Content) != 0 {
		t.Fatalf("non-transactional message = %#v", m)
	}
	mustDecode(t, d, encBegin(0x16B3900, commitTime, 772))
	if r := mustDecode(t, d, encInsert(16390, tup1...)).(*Row); r.Seq != 0 || r.Xid != 772 || r.CommitLSN != 0x16B3900 {
		t.Fatalf("first row of second transaction = %+v", r)
	}
}

// TestEncodingAgreesWithPglogrepl checks the hand encoders against pglogrepl's
// own parser, so the unit tests and fuzz seeds speak real pgoutput.
func TestEncodingAgreesWithPglogrepl(t *testing.T) {
	rel := outboxRelation(16390)
	tup := outboxTuple(uuid1, "orders", `{"a":1}`)
	check := func(msg []byte, want pglogrepl.Message) {
		t.Helper()
		got, err := pglogrepl.Parse(msg)
		if err != nil {
			t.Fatalf("pglogrepl.Parse(%q): %v", msg[0], err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pglogrepl parsed %q as\n%#v\nwant\n%#v", msg[0], got, want)
		}
	}
	begin := &pglogrepl.BeginMessage{FinalLSN: 0x1234, CommitTime: commitTime.Local(), Xid: 9}
	begin.SetType(pglogrepl.MessageTypeBegin)
	check(encBegin(0x1234, commitTime, 9), begin)
	commit := &pglogrepl.CommitMessage{CommitLSN: 0x1234, TransactionEndLSN: 0x1260, CommitTime: commitTime.Local()}
	commit.SetType(pglogrepl.MessageTypeCommit)
	check(encCommit(0x1234, 0x1260, commitTime), commit)
	relMsg := &pglogrepl.RelationMessage{RelationID: 16390, Namespace: "public", RelationName: "outbox",
		ReplicaIdentity: 'd', ColumnNum: uint16(len(rel.Columns))}
	for _, c := range rel.Columns {
		flags := uint8(0)
		if c.Key {
			flags = 1
		}
		relMsg.Columns = append(relMsg.Columns, &pglogrepl.RelationMessageColumn{Flags: flags, Name: c.Name, DataType: c.TypeOID, TypeModifier: c.TypeMod})
	}
	relMsg.SetType(pglogrepl.MessageTypeRelation)
	check(encRelation(rel), relMsg)

	got, err := pglogrepl.Parse(encUpdate(16390, 'O', tup, tup))
	if err != nil {
		t.Fatal(err)
	}
	upd := got.(*pglogrepl.UpdateMessage)
	if upd.OldTupleType != 'O' || len(upd.OldTuple.Columns) != 8 || len(upd.NewTuple.Columns) != 8 {
		t.Fatalf("pglogrepl update = %+v", upd)
	}
	for i, c := range upd.NewTuple.Columns {
		if c.DataType != tup[i].Kind || !bytes.Equal(c.Data, tup[i].Data) || !bytes.Equal(upd.OldTuple.Columns[i].Data, tup[i].Data) {
			t.Fatalf("pglogrepl column %d = %+v, want %+v", i, c, tup[i])
		}
	}
	got, err = pglogrepl.Parse(encMessage(true, 0x55, "deltabus", []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	if lm := got.(*pglogrepl.LogicalDecodingMessage); !lm.Transactional || lm.LSN != 0x55 || lm.Prefix != "deltabus" || string(lm.Content) != "x" {
		t.Fatalf("pglogrepl message = %+v", lm)
	}
	got, err = pglogrepl.Parse(encTruncate(3, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if tr := got.(*pglogrepl.TruncateMessage); tr.Option != 3 || !reflect.DeepEqual(tr.RelationIDs, []uint32{1, 2}) {
		t.Fatalf("pglogrepl truncate = %+v", tr)
	}
}

func TestRelationChangeMidStream(t *testing.T) {
	d := NewDecoder()
	v1 := outboxRelation(7)
	mustDecode(t, d, encRelation(v1))
	cached, _ := d.Relation(7)
	mustDecode(t, d, encBegin(0x100, commitTime, 1))
	tup := outboxTuple(uuid1, "orders", "{}")
	r0 := mustDecode(t, d, encInsert(7, tup...)).(*Row)

	mustDecode(t, d, encRelation(v1)) // same description again: same pointer
	if again, _ := d.Relation(7); again != cached {
		t.Fatal("identical Relation message replaced the cached relation")
	}
	v2 := outboxRelation(7)
	v2.Columns = append(v2.Columns, Column{Name: "tenant", TypeOID: 25, TypeMod: -1})
	mustDecode(t, d, encRelation(v2))
	r1 := mustDecode(t, d, encInsert(7, append(tup, text("acme"))...)).(*Row)
	if r0.Relation != cached || len(r0.Relation.Columns) != 8 {
		t.Fatalf("earlier row's relation changed: %+v", r0.Relation)
	}
	if len(r1.Relation.Columns) != 9 || r1.Relation.Columns[8].Name != "tenant" || r1.Seq != 1 {
		t.Fatalf("row after ADD COLUMN = %+v", r1)
	}
	_, err := d.Decode(encInsert(7, tup...)) // 8 columns against the 9-column relation
	if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "public.outbox") ||
		!strings.Contains(err.Error(), "tuple has 8 columns, relation has 9") {
		t.Fatalf("column count mismatch error = %v", err)
	}
	if r := mustDecode(t, d, encInsert(7, append(tup, null)...)).(*Row); r.Seq != 2 {
		t.Fatalf("seq after a failed row = %d, want 2", r.Seq)
	}
}

func TestTruncate(t *testing.T) {
	d := NewDecoder()
	mustDecode(t, d, encRelation(outboxRelation(7)))
	mustDecode(t, d, encRelation(&Relation{ID: 8, Namespace: "public", Name: "b"}))
	mustDecode(t, d, encBegin(0x200, commitTime, 5))
	tr := mustDecode(t, d, encTruncate(pglogrepl.TruncateOptionRestartIdentity, 7, 8)).(*Truncate)
	if len(tr.Relations) != 2 || tr.Relations[0].Name != "outbox" || tr.Relations[1].Name != "b" ||
		tr.Cascade || !tr.RestartIdentity || tr.Xid != 5 || tr.CommitLSN != 0x200 || d.Truncates() != 1 {
		t.Fatalf("truncate = %+v (count %d)", tr, d.Truncates())
	}
	if r := mustDecode(t, d, encInsert(7, outboxTuple(uuid1, "t", "{}")...)).(*Row); r.Seq != 0 {
		t.Fatalf("row after truncate has seq %d, want 0", r.Seq)
	}
}

func TestDetach(t *testing.T) {
	d := NewDecoder()
	mustDecode(t, d, encRelation(outboxRelation(7)))
	mustDecode(t, d, encBegin(0x200, commitTime, 5))
	tup := outboxTuple(uuid1, "orders", `{"x":"y"}`)
	buf := encUpdate(7, 'O', tup, tup)
	r := mustDecode(t, d, buf).(*Row)
	r.Detach()
	clear(buf)
	for i := range tup {
		if !reflect.DeepEqual(r.New[i], tup[i]) || !reflect.DeepEqual(r.Old[i], tup[i]) {
			t.Fatalf("column %d after Detach: new %+v old %+v, want %+v", i, r.New[i], r.Old[i], tup[i])
		}
	}
	buf = encMessage(false, 1, "p", []byte("content"))
	m := mustDecode(t, d, buf).(*LogicalMessage)
	m.Detach()
	clear(buf)
	if string(m.Content) != "content" {
		t.Fatalf("message content after Detach = %q", m.Content)
	}
}

// TestReuseRowsDoesNotAllocate: with ReuseRows, decoding an insert allocates
// nothing and returns the same Row each time.
func TestReuseRowsDoesNotAllocate(t *testing.T) {
	d := NewDecoder()
	d.ReuseRows()
	mustDecode(t, d, encRelation(outboxRelation(16390)))
	mustDecode(t, d, encBegin(0x16B3748, commitTime, 771))
	msg := encInsert(16390, outboxTuple(uuid1, "orders", `{"a":1}`)...)
	first := mustDecode(t, d, msg)
	if n := testing.AllocsPerRun(100, func() {
		if m, err := d.Decode(msg); err != nil || m != first {
			t.Fatalf("Decode = %p, %v; want the reused row %p", m, err, first)
		}
	}); n != 0 {
		t.Fatalf("decoding an insert allocates %v times with ReuseRows", n)
	}
}
