package decoding

import (
	"errors"
	"strings"
	"testing"
)

// primed returns a decoder that knows relation 7 (the outbox) and, if inTx,
// is inside a transaction.
func primed(t *testing.T, inTx bool) *Decoder {
	d := NewDecoder()
	mustDecode(t, d, encRelation(outboxRelation(7)))
	if inTx {
		mustDecode(t, d, encBegin(0x300, commitTime, 9))
	}
	return d
}

func TestProtocolErrors(t *testing.T) {
	tup := outboxTuple(uuid1, "orders", "{}")
	short := outboxTuple(uuid1, "orders", "{}")[:7]
	badKind := encInsert(7, tup...)
	badKind[4+1+1+2] = 'x' // first datum's kind
	cases := []struct {
		name string
		inTx bool
		msg  []byte
		want string
	}{
		{"empty", false, nil, "empty message"},
		{"unknown type", false, []byte{'Z', 1}, `unsupported message type 'Z'`},
		{"stream start", true, []byte{'S', 0, 0, 0, 1, 1}, `unsupported message type 'S'`},
		{"row outside transaction", false, encInsert(7, tup...), "outside a transaction"},
		{"update outside transaction", false, encUpdate(7, 0, nil, tup), "outside a transaction"},
		{"unknown relation", true, encInsert(99, tup...), "unknown relation id 99"},
		{"commit without begin", false, encCommit(0x300, 0x330, commitTime), "without a begin"},
		{"begin inside transaction", true, encBegin(0x400, commitTime, 10), "while xid 9 is still open"},
		{"commit LSN mismatch", true, encCommit(0x301, 0x330, commitTime), "differs from its begin's final LSN 0/300"},
		{"column count", true, encInsert(7, short...), "public.outbox (id 7, 8 columns): tuple has 7 columns"},
		{"old column count", true, encUpdate(7, 'K', short, tup), "tuple has 7 columns, relation has 8"},
		{"insert marker", true, append([]byte{'I', 0, 0, 0, 7, 'K'}, encInsert(7, tup...)[6:]...), `tuple marker 'K'`},
		{"delete marker", true, encDelete(7, 'N', tup...), `tuple marker 'N'`},
		{"update marker", true, encUpdate(7, 'X', tup, tup), `tuple marker 'X'`},
		{"datum kind", true, badKind, `column 0 (id): unknown datum kind 'x'`},
		{"trailing bytes", true, append(encInsert(7, tup...), 0), "1 trailing bytes"},
		{"truncate outside transaction", false, encTruncate(0, 7), "truncate outside a transaction"},
		{"truncate unknown relation", true, encTruncate(0, 7, 8), "unknown relation id 8"},
		{"truncate count", true, encTruncate(0, 7)[:5], "message truncated"},
		{"transactional message outside transaction", false, encMessage(true, 1, "deltabus", nil), "outside a transaction"},
		{"relation column count", false, []byte{'R', 0, 0, 0, 8, 's', 0, 't', 0, 'd', 0xff, 0xff}, "65535 columns announced"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := primed(t, c.inTx)
			m, err := d.Decode(c.msg)
			if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode = %v, %v; want an ErrProtocol error containing %q", m, err, c.want)
			}
			if m != nil {
				t.Fatalf("Decode returned %#v with an error", m)
			}
			if d.InTransaction() != c.inTx {
				t.Fatalf("error changed the transaction state")
			}
		})
	}
}

// TestTruncatedMessages feeds every strict prefix of every kind of valid
// message: each must fail with ErrProtocol, not panic or succeed.
func TestTruncatedMessages(t *testing.T) {
	tup := outboxTuple(uuid1, "orders", `{"k":"v"}`)
	msgs := map[string][]byte{
		"begin":    encBegin(0x300, commitTime, 9),
		"relation": encRelation(outboxRelation(7)),
		"insert":   encInsert(7, tup...),
		"update":   encUpdate(7, 'O', tup, tup),
		"delete":   encDelete(7, 'K', tup...),
		"truncate": encTruncate(1, 7),
		"message":  encMessage(true, 5, "deltabus", []byte("body")),
		"type":     encType(1, "ns", "name"),
		"origin":   encOrigin(1, "origin"),
	}
	for name, msg := range msgs {
		for n := 0; n < len(msg); n++ {
			d := primed(t, name != "begin")
			if m, err := d.Decode(msg[:n]); err == nil || !errors.Is(err, ErrProtocol) {
				t.Fatalf("%s truncated to %d of %d bytes: Decode = %#v, %v", name, n, len(msg), m, err)
			}
		}
		d := primed(t, name != "begin")
		if _, err := d.Decode(msg); err != nil {
			t.Fatalf("%s in full: %v", name, err)
		}
	}
	// Commit needs a transaction whose final LSN it names.
	msg := encCommit(0x300, 0x330, commitTime)
	for n := 0; n < len(msg); n++ {
		if _, err := primed(t, true).Decode(msg[:n]); err == nil {
			t.Fatalf("commit truncated to %d bytes decoded", n)
		}
	}
}

// TestErrorKeepsState: after a failed row, the next row takes the seq the
// failed one would have had, and the relation cache is untouched by a
// failed Relation message.
func TestErrorKeepsState(t *testing.T) {
	d := primed(t, true)
	before, _ := d.Relation(7)
	bad := encRelation(outboxRelation(7))
	if _, err := d.Decode(bad[:len(bad)-3]); err == nil {
		t.Fatal("truncated relation decoded")
	}
	if after, _ := d.Relation(7); after != before {
		t.Fatal("failed Relation message changed the cache")
	}
	tup := outboxTuple(uuid1, "orders", "{}")
	mustDecode(t, d, encInsert(7, tup...))
	if _, err := d.Decode(encInsert(7, tup[:3]...)); err == nil {
		t.Fatal("short tuple decoded")
	}
	if r := mustDecode(t, d, encInsert(7, tup...)).(*Row); r.Seq != 1 {
		t.Fatalf("seq = %d, want 1", r.Seq)
	}
}
