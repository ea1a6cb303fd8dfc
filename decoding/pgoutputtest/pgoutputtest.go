// Package pgoutputtest writes pgoutput (proto_version 1) messages and the
// replication protocol's CopyData frames around them, laid out as
// PostgreSQL's src/backend/replication/logical/proto.c and walsender.c
// write them. Tests of the decoder and of the streaming pipeline use it to
// play a replication stream without a server.
package pgoutputtest

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// Column describes one column of a Relation message.
type Column struct {
	Name    string
	TypeOID uint32
	TypeMod int32
	Key     bool
}

// Datum is one value of a tuple: Kind 'n' (null), 'u' (unchanged TOAST),
// 't' (text) or 'b' (binary), with Data for the last two.
type Datum struct {
	Kind byte
	Data []byte
}

// Text, Null and Unchanged build datums.
func Text(s string) Datum { return Datum{Kind: 't', Data: []byte(s)} }

var (
	Null      = Datum{Kind: 'n'}
	Unchanged = Datum{Kind: 'u'}
)

// pgEpochMicros is 2000-01-01 00:00:00 UTC in microseconds since 1970.
const pgEpochMicros = 946684800 * 1000000

type enc []byte

func (e enc) u8(v byte) enc           { return append(e, v) }
func (e enc) u16(v uint16) enc        { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc        { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc        { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) lsn(v pglogrepl.LSN) enc { return e.u64(uint64(v)) }
func (e enc) str(s string) enc        { return append(append(e, s...), 0) }
func (e enc) time(t time.Time) enc    { return e.u64(uint64(t.UnixMicro() - pgEpochMicros)) }
func (e enc) lenBytes(b []byte) enc   { return append(e.u32(uint32(len(b))), b...) }

func (e enc) tuple(ds []Datum) enc {
	e = e.u16(uint16(len(ds)))
	for _, d := range ds {
		e = e.u8(d.Kind)
		if d.Kind == 't' || d.Kind == 'b' {
			e = e.lenBytes(d.Data)
		}
	}
	return e
}

// Begin is a Begin message.
func Begin(final pglogrepl.LSN, t time.Time, xid uint32) []byte {
	return enc{'B'}.lsn(final).time(t).u32(xid)
}

// Commit is a Commit message.
func Commit(commit, end pglogrepl.LSN, t time.Time) []byte {
	return enc{'C'}.u8(0).lsn(commit).lsn(end).time(t)
}

// Relation is a Relation message (replica identity default).
func Relation(id uint32, namespace, name string, cols []Column) []byte {
	e := enc{'R'}.u32(id).str(namespace).str(name).u8('d').u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.Key {
			flags = 1
		}
		e = e.u8(flags).str(c.Name).u32(c.TypeOID).u32(uint32(c.TypeMod))
	}
	return e
}

// Insert is an Insert message.
func Insert(relID uint32, ds ...Datum) []byte { return enc{'I'}.u32(relID).u8('N').tuple(ds) }

// Update is an Update message; oldKind is 0 (no old tuple), 'K' or 'O'.
func Update(relID uint32, oldKind byte, old, new []Datum) []byte {
	e := enc{'U'}.u32(relID)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old)
	}
	return e.u8('N').tuple(new)
}

// Delete is a Delete message.
func Delete(relID uint32, oldKind byte, old ...Datum) []byte {
	return enc{'D'}.u32(relID).u8(oldKind).tuple(old)
}

// Truncate is a Truncate message.
func Truncate(opts byte, relIDs ...uint32) []byte {
	e := enc{'T'}.u32(uint32(len(relIDs))).u8(opts)
	for _, id := range relIDs {
		e = e.u32(id)
	}
	return e
}

// Message is a logical decoding message (pg_logical_emit_message).
func Message(transactional bool, lsn pglogrepl.LSN, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	return enc{'M'}.u8(flags).lsn(lsn).str(prefix).lenBytes(content)
}

// Type is a Type message.
func Type(oid uint32, ns, name string) []byte { return enc{'Y'}.u32(oid).str(ns).str(name) }

// Origin is an Origin message.
func Origin(lsn pglogrepl.LSN, name string) []byte { return enc{'O'}.lsn(lsn).str(name) }

// XLogData wraps a pgoutput message as the CopyData payload the walsender
// sends ('w', WAL start, WAL end, send time).
func XLogData(walStart pglogrepl.LSN, msg []byte) []byte {
	return append(enc{'w'}.lsn(walStart).lsn(walStart+pglogrepl.LSN(len(msg))).time(time.Now()), msg...)
}

// Keepalive is a primary keepalive CopyData payload ('k').
func Keepalive(walEnd pglogrepl.LSN, replyRequested bool) []byte {
	var reply byte
	if replyRequested {
		reply = 1
	}
	return enc{'k'}.lsn(walEnd).time(time.Now()).u8(reply)
}

// OutboxColumns are the DeltaBus outbox table's columns as pgoutput
// describes them.
func OutboxColumns() []Column {
	return []Column{
		{Name: "id", TypeOID: 2950, TypeMod: -1, Key: true},
		{Name: "topic", TypeOID: 25, TypeMod: -1},
		{Name: "key", TypeOID: 25, TypeMod: -1},
		{Name: "type", TypeOID: 25, TypeMod: -1},
		{Name: "schema_version", TypeOID: 23, TypeMod: -1},
		{Name: "payload", TypeOID: 3802, TypeMod: -1},
		{Name: "headers", TypeOID: 3802, TypeMod: -1},
		{Name: "occurred_at", TypeOID: 1184, TypeMod: -1},
	}
}

// OutboxTuple is an outbox row with the given id (a uuid), topic and JSON
// payload.
func OutboxTuple(id, topic, payload string) []Datum {
	return []Datum{Text(id), Text(topic), Text("k-" + id[:4]), Text("OrderPlaced"), Text("1"),
		Text(payload), Null, Text("2026-11-30 07:48:59.123456+00")}
}
