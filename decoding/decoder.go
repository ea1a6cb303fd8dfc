package decoding

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// Decoder turns pgoutput (proto_version 1) messages into Begin, Row, Commit,
// Truncate and LogicalMessage values. It keeps the relation cache and the
// current transaction, so one Decoder serves one replication stream (one
// START_REPLICATION): pgoutput announces each relation once per stream.
// A Decoder is not safe for concurrent use.
type Decoder struct {
	relations map[uint32]*Relation
	tx        txState
	alloc     rowAlloc
	typeMap   *pgtype.Map
	truncates int64
}

// txState is the transaction opened by the last Begin.
type txState struct {
	open       bool
	xid        uint32
	commitLSN  pglogrepl.LSN
	commitTime time.Time
	seq        int
}

// NewDecoder returns a Decoder with an empty relation cache, outside any
// transaction.
func NewDecoder() *Decoder {
	return &Decoder{relations: make(map[uint32]*Relation)}
}

// ReuseRows makes every Row that Decode returns the same Row, its tuples
// carved from the same slab: a Row is then valid only until the next
// Decode, as its datums' Data already are, and decoding a row allocates
// nothing. For a caller done with each row before it decodes the next one,
// as the relay routing rows into a batch is.
func (d *Decoder) ReuseRows() { d.alloc.reuse = true }

// Decode parses one XLogData payload (XLogData.WALData) and returns the
// message it carries, or nil for messages that only change the decoder's
// state (Relation, Type, Origin). Returned values may alias walData (see
// Datum); they stay valid only until the next Decode. Every error wraps
// ErrProtocol and leaves the decoder's state as it was before the call.
func (d *Decoder) Decode(walData []byte) (Message, error) {
	if len(walData) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrProtocol)
	}
	typ := pglogrepl.MessageType(walData[0])
	r := reader{buf: walData, pos: 1}
	var (
		m   Message
		err error
	)
	switch typ {
	case pglogrepl.MessageTypeBegin:
		m, err = d.begin(&r)
	case pglogrepl.MessageTypeCommit:
		m, err = d.commit(&r)
	case pglogrepl.MessageTypeInsert, pglogrepl.MessageTypeUpdate, pglogrepl.MessageTypeDelete:
		m, err = d.row(&r, typ)
	case pglogrepl.MessageTypeRelation:
		err = d.relation(&r)
	case pglogrepl.MessageTypeTruncate:
		m, err = d.truncate(&r)
	case pglogrepl.MessageTypeMessage:
		m, err = d.logicalMessage(&r)
	case pglogrepl.MessageTypeType:
		err = skipType(&r)
	case pglogrepl.MessageTypeOrigin:
		err = skipOrigin(&r)
	default:
		err = fmt.Errorf("unsupported message type %q (proto_version 1 has no such message)", byte(typ))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decode %s message: %w", ErrProtocol, typeName(typ), err)
	}
	return m, nil
}

// Truncates returns how many Truncate messages the decoder has returned.
func (d *Decoder) Truncates() int64 { return d.truncates }

// InTransaction reports whether a Begin has been decoded without its Commit.
func (d *Decoder) InTransaction() bool { return d.tx.open }

// Relation returns the cached relation with the given id, if announced.
func (d *Decoder) Relation(id uint32) (*Relation, bool) {
	rel, ok := d.relations[id]
	return rel, ok
}

// TypeMap returns the decoder's pgx type map, for DecodeValue. Like the
// Decoder, it is not safe for concurrent use.
func (d *Decoder) TypeMap() *pgtype.Map {
	if d.typeMap == nil {
		d.typeMap = pgtype.NewMap()
	}
	return d.typeMap
}

func typeName(t pglogrepl.MessageType) string {
	if s := t.String(); s != "Unknown" {
		return s
	}
	return fmt.Sprintf("%q", byte(t))
}

func (d *Decoder) begin(r *reader) (Message, error) {
	finalLSN, commitTime, xid := r.lsn(), r.time(), r.u32()
	if err := r.err(); err != nil {
		return nil, err
	}
	if d.tx.open {
		return nil, fmt.Errorf("begin of xid %d while xid %d is still open", xid, d.tx.xid)
	}
	d.tx = txState{open: true, xid: xid, commitLSN: finalLSN, commitTime: commitTime}
	return &Begin{Xid: xid, CommitLSN: finalLSN, CommitTime: commitTime}, nil
}

func (d *Decoder) commit(r *reader) (Message, error) {
	_ = r.u8() // flags, unused
	commitLSN, endLSN, commitTime := r.lsn(), r.lsn(), r.time()
	if err := r.err(); err != nil {
		return nil, err
	}
	if !d.tx.open {
		return nil, fmt.Errorf("commit at %s without a begin", commitLSN)
	}
	if commitLSN != d.tx.commitLSN {
		return nil, fmt.Errorf("commit LSN %s of xid %d differs from its begin's final LSN %s",
			commitLSN, d.tx.xid, d.tx.commitLSN)
	}
	d.tx = txState{}
	return &Commit{CommitLSN: commitLSN, EndLSN: endLSN, CommitTime: commitTime}, nil
}

func (d *Decoder) truncate(r *reader) (Message, error) {
	n := r.u32()
	opts := r.u8()
	if err := r.err(); err != nil {
		return nil, err
	}
	if uint64(n)*4 > uint64(r.remaining()) {
		return nil, fmt.Errorf("%d relation ids announced, %d bytes left: %w", n, r.remaining(), errShort)
	}
	if !d.tx.open {
		return nil, fmt.Errorf("truncate outside a transaction")
	}
	rels := make([]*Relation, n)
	for i := range rels {
		id := r.u32()
		rel, ok := d.relations[id]
		if !ok {
			return nil, fmt.Errorf("truncate of unknown relation id %d", id)
		}
		rels[i] = rel
	}
	d.truncates++
	return &Truncate{
		Relations:       rels,
		Cascade:         opts&pglogrepl.TruncateOptionCascade != 0,
		RestartIdentity: opts&pglogrepl.TruncateOptionRestartIdentity != 0,
		Xid:             d.tx.xid,
		CommitLSN:       d.tx.commitLSN,
		CommitTime:      d.tx.commitTime,
	}, nil
}

func (d *Decoder) logicalMessage(r *reader) (Message, error) {
	flags := r.u8()
	lsn := r.lsn()
	prefix := r.cstr()
	content := r.take(int(r.u32()))
	if err := r.err(); err != nil {
		return nil, err
	}
	transactional := flags&1 != 0
	if transactional && !d.tx.open {
		return nil, fmt.Errorf("transactional message %q outside a transaction", prefix)
	}
	return &LogicalMessage{Transactional: transactional, LSN: lsn, Prefix: string(prefix), Content: content}, nil
}

// skipType validates a Type message; the decoder does not need its content
// (DecodeValue looks types up by OID in the pgx type map).
func skipType(r *reader) error {
	_ = r.u32()
	_ = r.cstr()
	_ = r.cstr()
	return r.err()
}

// skipOrigin validates an Origin message (replication origin of a
// transaction replayed from elsewhere); the relay does not use it.
func skipOrigin(r *reader) error {
	_ = r.lsn()
	_ = r.cstr()
	return r.err()
}
