package decoding

import (
	"time"

	"github.com/jackc/pglogrepl"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
)

// Adapters from the decoder's types to the pgoutputtest encoders.

func wire(ds []Datum) []pg.Datum {
	out := make([]pg.Datum, len(ds))
	for i, d := range ds {
		out[i] = pg.Datum{Kind: d.Kind, Data: d.Data}
	}
	return out
}

func encBegin(final pglogrepl.LSN, t time.Time, xid uint32) []byte { return pg.Begin(final, t, xid) }
func encCommit(commit, end pglogrepl.LSN, t time.Time) []byte      { return pg.Commit(commit, end, t) }

func encRelation(rel *Relation) []byte {
	cols := make([]pg.Column, len(rel.Columns))
	for i, c := range rel.Columns {
		cols[i] = pg.Column{Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod, Key: c.Key}
	}
	return pg.Relation(rel.ID, rel.Namespace, rel.Name, cols)
}

func encInsert(relID uint32, ds ...Datum) []byte { return pg.Insert(relID, wire(ds)...) }

// encUpdate writes an Update; oldKind is 0 (no old tuple), 'K' or 'O'.
func encUpdate(relID uint32, oldKind byte, old, new []Datum) []byte {
	return pg.Update(relID, oldKind, wire(old), wire(new))
}

func encDelete(relID uint32, oldKind byte, old ...Datum) []byte {
	return pg.Delete(relID, oldKind, wire(old)...)
}

func encTruncate(opts byte, relIDs ...uint32) []byte { return pg.Truncate(opts, relIDs...) }

func encMessage(transactional bool, lsn pglogrepl.LSN, prefix string, content []byte) []byte {
	return pg.Message(transactional, lsn, prefix, content)
}

func encType(oid uint32, ns, name string) []byte { return pg.Type(oid, ns, name) }

func encOrigin(lsn pglogrepl.LSN, name string) []byte { return pg.Origin(lsn, name) }

func text(s string) Datum { return Datum{Kind: DatumText, Data: []byte(s)} }

var (
	null      = Datum{Kind: DatumNull}
	unchanged = Datum{Kind: DatumUnchanged}
)

// outboxRelation is the outbox table as pgoutput describes it.
func outboxRelation(id uint32) *Relation {
	rel := &Relation{ID: id, Namespace: "public", Name: "outbox"}
	for _, c := range pg.OutboxColumns() {
		rel.Columns = append(rel.Columns, Column{Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod, Key: c.Key})
	}
	return rel
}

func outboxTuple(id, topic, payload string) []Datum {
	var out []Datum
	for _, d := range pg.OutboxTuple(id, topic, payload) {
		out = append(out, Datum{Kind: d.Kind, Data: d.Data})
	}
	return out
}
