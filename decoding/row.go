package decoding

import (
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
)

// row parses an Insert, Update or Delete message into a Row of the current
// transaction.
func (d *Decoder) row(r *reader, typ pglogrepl.MessageType) (Message, error) {
	id := r.u32()
	kind := r.u8()
	if err := r.err(); err != nil {
		return nil, err
	}
	if !d.tx.open {
		return nil, fmt.Errorf("row of relation id %d outside a transaction", id)
	}
	rel, ok := d.relations[id]
	if !ok {
		return nil, fmt.Errorf("row of unknown relation id %d (no Relation message seen)", id)
	}
	ncols := len(rel.Columns)
	row := d.alloc.row()
	*row = Row{Relation: rel, Seq: d.tx.seq, Xid: d.tx.xid, CommitLSN: d.tx.commitLSN, CommitTime: d.tx.commitTime}
	var err error
	switch typ {
	case pglogrepl.MessageTypeInsert:
		row.Op = OpInsert
		err = expectTupleKind(kind, "N")
		if err == nil {
			row.New, err = d.tuple(r, rel)
		}
	case pglogrepl.MessageTypeUpdate:
		row.Op = OpUpdate
		if kind == 'K' || kind == 'O' {
			if row.Old, err = d.tuple(r, rel); err == nil {
				kind = r.u8()
			}
		}
		if err == nil {
			err = expectTupleKind(kind, "N")
		}
		if err == nil {
			row.New, err = d.tuple(r, rel)
		}
	default:
		row.Op = OpDelete
		err = expectTupleKind(kind, "KO")
		if err == nil {
			row.Old, err = d.tuple(r, rel)
		}
	}
	if err == nil && r.remaining() > 0 {
		err = fmt.Errorf("%d trailing bytes", r.remaining())
	}
	if err != nil {
		return nil, fmt.Errorf("relation %s (id %d, %d columns): %w", rel.qualified(), id, ncols, err)
	}
	d.tx.seq++
	return row, nil
}

// expectTupleKind checks a tuple marker ('N', 'K' or 'O') against the
// markers allowed here.
func expectTupleKind(got byte, want string) error {
	if strings.IndexByte(want, got) >= 0 {
		return nil
	}
	return fmt.Errorf("tuple marker %q, want one of %q", got, want)
}

// tuple parses a TupleData whose column count must match rel. The datums'
// Data alias the message.
func (d *Decoder) tuple(r *reader, rel *Relation) ([]Datum, error) {
	n := int(r.u16())
	if err := r.err(); err != nil {
		return nil, err
	}
	if n != len(rel.Columns) {
		return nil, fmt.Errorf("tuple has %d columns, relation has %d", n, len(rel.Columns))
	}
	if n > r.remaining() { // every datum takes at least one byte
		return nil, fmt.Errorf("%d columns announced, %d bytes left: %w", n, r.remaining(), errShort)
	}
	datums := d.alloc.datums(n)
	for i := range datums {
		kind := r.u8()
		switch kind {
		case DatumNull, DatumUnchanged:
			datums[i] = Datum{Kind: kind}
		case DatumText, DatumBinary:
			data := r.take(int(r.u32()))
			if r.short {
				return nil, fmt.Errorf("column %d (%s): %w", i, rel.Columns[i].Name, errShort)
			}
			datums[i] = Datum{Kind: kind, Data: data}
		default:
			if r.short {
				return nil, fmt.Errorf("column %d (%s): %w", i, rel.Columns[i].Name, errShort)
			}
			return nil, fmt.Errorf("column %d (%s): unknown datum kind %q", i, rel.Columns[i].Name, kind)
		}
	}
	return datums, nil
}
