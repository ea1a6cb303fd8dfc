package decoding

import (
	"encoding/binary"
	"errors"
	"testing"
)

// frame joins messages as the fuzz input format: each one preceded by its
// length as a big-endian uint16.
func frame(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.BigEndian.AppendUint16(out, uint16(len(m)))
		out = append(out, m...)
	}
	return out
}

// unframe splits a fuzz input into messages; a short last length takes the
// rest of the input.
func unframe(b []byte) [][]byte {
	var msgs [][]byte
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		msgs = append(msgs, b[:n])
		b = b[n:]
	}
	return msgs
}

func fuzzSeeds() [][]byte {
	rel := outboxRelation(7)
	tup := outboxTuple(uuid1, "orders", `{"a": "é \"q\""}`)
	wider := outboxRelation(7)
	wider.Columns = append(wider.Columns, Column{Name: "tenant", TypeOID: 25, TypeMod: -1})
	binTup := append(append([]Datum(nil), tup...), Datum{Kind: DatumBinary, Data: []byte{0, 1}})
	return [][]byte{
		frame(encRelation(rel), encBegin(0x100, commitTime, 1), encInsert(7, tup...), encCommit(0x100, 0x130, commitTime)),
		frame(encRelation(rel), encType(16500, "public", "mood"), encOrigin(0x99, "o"),
			encBegin(0x200, commitTime, 2), encInsert(7, tup...), encMessage(true, 0x1ff, "deltabus", []byte("m")),
			encRelation(wider), encInsert(7, binTup...),
			encUpdate(7, 'K', binTup, binTup), encUpdate(7, 0, nil, binTup), encDelete(7, 'O', binTup...),
			encTruncate(3, 7), encCommit(0x200, 0x240, commitTime), encMessage(false, 0x250, "x", nil)),
		frame(encInsert(7, tup...), encCommit(1, 2, commitTime), encBegin(1, commitTime, 3), encBegin(1, commitTime, 3)),
		frame([]byte{'S', 0, 0, 0, 1, 1}, nil, []byte{'R'}),
	}
}

// FuzzDecode feeds several messages through one Decoder: Decode must never
// panic, every error must wrap ErrProtocol and come without a message, and
// what it returns must be consistent with the stream.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Add(frame(loadFrames(f, captureSingle)[:9]...)) // three real transactions
	f.Add(frame(loadFrames(f, captureBatch)[:6]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder()
		nextSeq := 0
		for _, msg := range unframe(data) {
			wasOpen := d.InTransaction()
			m, err := d.Decode(msg)
			if err != nil {
				if m != nil || !errors.Is(err, ErrProtocol) {
					t.Fatalf("Decode = %#v, %v", m, err)
				}
				if d.InTransaction() != wasOpen {
					t.Fatal("a failed Decode changed the transaction state")
				}
				continue
			}
			switch m := m.(type) {
			case *Begin:
				nextSeq = 0
			case *Row:
				checkFuzzRow(t, m, nextSeq)
				nextSeq++
			case *Commit, *Truncate:
				if !wasOpen {
					t.Fatalf("%T outside a transaction", m)
				}
			}
		}
	})
}

func checkFuzzRow(t *testing.T, r *Row, seq int) {
	if r.Seq != seq {
		t.Fatalf("row seq %d, want %d", r.Seq, seq)
	}
	n := len(r.Relation.Columns)
	if (r.New != nil && len(r.New) != n) || (r.Old != nil && len(r.Old) != n) || (r.New == nil && r.Old == nil) {
		t.Fatalf("row with %d/%d datums for %d columns", len(r.New), len(r.Old), n)
	}
}
