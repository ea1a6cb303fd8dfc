package decoding

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// Hand encoders for pgoutput proto_version 1 messages, laid out as
// PostgreSQL's src/backend/replication/logical/proto.c writes them.

type enc []byte

func (e enc) u8(v byte) enc           { return append(e, v) }
func (e enc) u16(v uint16) enc        { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc        { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc        { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) lsn(v pglogrepl.LSN) enc { return e.u64(uint64(v)) }
func (e enc) str(s string) enc        { return append(append(e, s...), 0) }
func (e enc) time(t time.Time) enc    { return e.u64(uint64(t.UnixMicro() - pgEpochMicros)) }
func (e enc) bytes(b []byte) enc      { return append(e, b...) }
func (e enc) lenBytes(b []byte) enc   { return e.u32(uint32(len(b))).bytes(b) }
func (e enc) tuple(ds ...Datum) enc   { return encTuple(e, ds) }
func encBegin(final pglogrepl.LSN, t time.Time, xid uint32) []byte {
	return enc{'B'}.lsn(final).time(t).u32(xid)
}

func encCommit(commit, end pglogrepl.LSN, t time.Time) []byte {
	return enc{'C'}.u8(0).lsn(commit).lsn(end).time(t)
}

func encRelation(rel *Relation) []byte {
	e := enc{'R'}.u32(rel.ID).str(rel.Namespace).str(rel.Name).u8('d').u16(uint16(len(rel.Columns)))
	for _, c := range rel.Columns {
		var flags byte
		if c.Key {
			flags = 1
		}
		e = e.u8(flags).str(c.Name).u32(c.TypeOID).u32(uint32(c.TypeMod))
	}
	return e
}

func encTuple(e enc, ds []Datum) enc {
	e = e.u16(uint16(len(ds)))
	for _, d := range ds {
		e = e.u8(d.Kind)
		if d.Kind == DatumText || d.Kind == DatumBinary {
			e = e.lenBytes(d.Data)
		}
	}
	return e
}

func encInsert(relID uint32, ds ...Datum) []byte {
	return enc{'I'}.u32(relID).u8('N').tuple(ds...)
}

// encUpdate writes an Update; oldKind is 0 (no old tuple), 'K' or 'O'.
func encUpdate(relID uint32, oldKind byte, old, new []Datum) []byte {
	e := enc{'U'}.u32(relID)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old...)
	}
	return e.u8('N').tuple(new...)
}

func encDelete(relID uint32, oldKind byte, old ...Datum) []byte {
	return enc{'D'}.u32(relID).u8(oldKind).tuple(old...)
}

func encTruncate(opts byte, relIDs ...uint32) []byte {
	e := enc{'T'}.u32(uint32(len(relIDs))).u8(opts)
	for _, id := range relIDs {
		e = e.u32(id)
	}
	return e
}

func encMessage(transactional bool, lsn pglogrepl.LSN, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	return enc{'M'}.u8(flags).lsn(lsn).str(prefix).lenBytes(content)
}

func encType(oid uint32, ns, name string) []byte { return enc{'Y'}.u32(oid).str(ns).str(name) }

func encOrigin(lsn pglogrepl.LSN, name string) []byte { return enc{'O'}.lsn(lsn).str(name) }

func text(s string) Datum { return Datum{Kind: DatumText, Data: []byte(s)} }

var (
	null      = Datum{Kind: DatumNull}
	unchanged = Datum{Kind: DatumUnchanged}
)

// outboxRelation is the outbox table as pgoutput describes it.
func outboxRelation(id uint32) *Relation {
	return &Relation{ID: id, Namespace: "public", Name: "outbox", Columns: []Column{
		{Name: "id", TypeOID: 2950, TypeMod: -1, Key: true},
		{Name: "topic", TypeOID: 25, TypeMod: -1},
		{Name: "key", TypeOID: 25, TypeMod: -1},
		{Name: "type", TypeOID: 25, TypeMod: -1},
		{Name: "schema_version", TypeOID: 23, TypeMod: -1},
		{Name: "payload", TypeOID: 3802, TypeMod: -1},
		{Name: "headers", TypeOID: 3802, TypeMod: -1},
		{Name: "occurred_at", TypeOID: 1184, TypeMod: -1},
	}}
}

func outboxTuple(id, topic, payload string) []Datum {
	return []Datum{text(id), text(topic), text("k-" + id[:4]), text("OrderPlaced"), text("1"),
		text(payload), null, text("2026-11-30 07:48:59.123456+00")}
}
