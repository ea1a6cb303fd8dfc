package decoding

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// Message is what Decoder.Decode yields: *Begin, *Row, *Commit, *Truncate or
// *LogicalMessage. Relation, Type and Origin messages only update the
// decoder's state and yield nil.
type Message interface{ isMessage() }

// Begin opens a source transaction. pgoutput sends the commit LSN and time
// up front, so every row of the transaction can carry them.
type Begin struct {
	Xid        uint32
	CommitLSN  pglogrepl.LSN // LSN of the commit record (pgoutput "final LSN")
	CommitTime time.Time     // UTC
}

// Commit closes the transaction opened by the last Begin.
type Commit struct {
	CommitLSN  pglogrepl.LSN // same as Begin.CommitLSN
	EndLSN     pglogrepl.LSN // end of the commit record: the position to acknowledge once durable
	CommitTime time.Time
}

// Op is the kind of row change.
type Op uint8

const (
	OpInsert Op = iota + 1
	OpUpdate
	OpDelete
	// OpTruncate is not used on a Row: the decoder reports TRUNCATE as a
	// *Truncate message, which is not a row and takes no Seq.
	OpTruncate
)

// Datum kinds of one column value in a tuple, as pgoutput sends them.
const (
	DatumNull      byte = 'n'
	DatumUnchanged byte = 'u' // unchanged TOASTed value (UPDATE only)
	DatumText      byte = 't'
	DatumBinary    byte = 'b'
)

// Datum is one column value exactly as sent. Data aliases the decoder's
// input buffer: it is valid only until the next Decode call; copy to keep
// (Row.Detach copies a whole row). Data is nil for DatumNull and
// DatumUnchanged, and non-nil (possibly empty) for DatumText and DatumBinary.
type Datum struct {
	Kind byte
	Data []byte
}

// Column is one column of a relation as last announced by a Relation message.
type Column struct {
	Name    string
	TypeOID uint32
	TypeMod int32
	Key     bool // part of the replica identity
}

// Relation is a table as described by the stream. A Relation message that
// changes the columns replaces the cached one: rows always come with the
// relation that was current when they were decoded. A Relation is never
// modified after it is published; a Relation message that repeats the cached
// description exactly keeps the cached pointer, so consumers may key derived
// data (such as a column index) by *Relation.
type Relation struct {
	ID        uint32
	Namespace string
	Name      string
	Columns   []Column
}

// Row is one changed row of the current transaction.
type Row struct {
	Relation *Relation
	Op       Op
	// Seq is the row's position among the rows of its transaction, from 0,
	// all relations counted (Truncate and LogicalMessage take no Seq).
	Seq int
	// New is the new tuple (insert, update); nil for delete. An UPDATE that
	// leaves a TOASTed value alone sends it as DatumUnchanged.
	New []Datum
	// Old is the old tuple: the replica identity key for a delete, and for an
	// update that changed the key (non-key columns then come as DatumNull),
	// or the whole old row under REPLICA IDENTITY FULL. nil when not sent.
	Old []Datum
	// Transaction context, copied from Begin.
	Xid        uint32
	CommitLSN  pglogrepl.LSN
	CommitTime time.Time
}

// Truncate reports a TRUNCATE of one or more relations in the current
// transaction. It is not a row: it takes no Seq.
type Truncate struct {
	Relations       []*Relation
	Cascade         bool
	RestartIdentity bool
	// Transaction context, copied from Begin.
	Xid        uint32
	CommitLSN  pglogrepl.LSN
	CommitTime time.Time
}

// LogicalMessage is a pg_logical_emit_message message (transactional or not),
// sent by pgoutput when the "messages" option is on. A transactional message
// arrives between the Begin and Commit of its transaction; a
// non-transactional one arrives on its own, outside any transaction.
type LogicalMessage struct {
	Transactional bool
	LSN           pglogrepl.LSN
	Prefix        string
	Content       []byte // aliases the input buffer, like Datum.Data
}

func (*Begin) isMessage()          {}
func (*Commit) isMessage()         {}
func (*Row) isMessage()            {}
func (*Truncate) isMessage()       {}
func (*LogicalMessage) isMessage() {}
