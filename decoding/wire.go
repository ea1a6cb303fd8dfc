package decoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"
)

// ErrProtocol is wrapped by every error Decode returns: malformed bytes, a
// message that is out of place (a row outside a transaction, a Commit
// without a Begin), an unknown relation, or a message proto_version 1 does
// not have.
var ErrProtocol = errors.New("pgoutput protocol error")

// errShort is the reader's sticky "buffer too short" condition.
var errShort = errors.New("message truncated")

// reader reads big-endian fields from one message. The first read past the
// end sets short and every later read returns zero values, so a parser can
// read a whole fixed layout and check r.err() once.
type reader struct {
	buf   []byte
	pos   int
	short bool
}

func (r *reader) remaining() int { return len(r.buf) - r.pos }

func (r *reader) take(n int) []byte {
	if r.short || n < 0 || n > r.remaining() {
		r.short = true
		return nil
	}
	b := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u8() byte {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) u16() uint16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func (r *reader) u32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) u64() uint64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (r *reader) lsn() pglogrepl.LSN { return pglogrepl.LSN(r.u64()) }

// pgEpochMicros is 2000-01-01 00:00:00 UTC in microseconds since the Unix epoch.
const pgEpochMicros = 946684800 * 1000000

// time reads a PostgreSQL TimestampTz (microseconds since 2000-01-01 UTC).
func (r *reader) time() time.Time {
	us := int64(r.u64())
	if r.short {
		return time.Time{}
	}
	return time.UnixMicro(pgEpochMicros + us).UTC()
}

// cstr reads a NUL-terminated string, without the NUL. The result aliases buf.
func (r *reader) cstr() []byte {
	if r.short {
		return nil
	}
	end := bytes.IndexByte(r.buf[r.pos:], 0)
	if end < 0 {
		r.short = true
		return nil
	}
	s := r.buf[r.pos : r.pos+end : r.pos+end]
	r.pos += end + 1
	return s
}

func (r *reader) err() error {
	if r.short {
		return errShort
	}
	return nil
}
