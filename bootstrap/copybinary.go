package bootstrap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/decoding"
)

// binCopySignature starts every COPY ... (FORMAT binary) stream.
var binCopySignature = []byte("PGCOPY\n\xff\r\n\x00")

// binRows parses COPY ... TO STDOUT (FORMAT binary) as pgconn hands it over
// (any split of the byte stream) and calls row for each tuple with one
// datum per column: DatumNull, or DatumBinary holding the type's send form.
// Datum data aliases internal buffers and is valid only during the call.
type binRows struct {
	ncols   int
	row     func([]decoding.Datum) error
	tuple   func([]byte) error // if set, called instead of row with the raw tuple
	header  bool               // the file header has been read
	trailer bool               // the end marker has been read
	partial []byte             // an incomplete tuple carried over from the last Write
	datums  []decoding.Datum
}

func newBinRows(ncols int, row func([]decoding.Datum) error) *binRows {
	return &binRows{ncols: ncols, row: row, datums: make([]decoding.Datum, ncols)}
}

// Write consumes complete tuples and keeps the rest for the next call.
func (c *binRows) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.partial) > 0 {
		// Complete the carried tuple one piece at a time: a tuple is
		// rarely split, and copying all of p would copy every row.
		for len(p) > 0 {
			need, err := c.need(c.partial)
			if err != nil {
				return 0, err
			}
			if need == 0 {
				break
			}
			k := min(need, len(p))
			c.partial = append(c.partial, p[:k]...)
			p = p[k:]
		}
		used, err := c.parse(c.partial)
		if err != nil {
			return 0, err
		}
		if used < len(c.partial) { // p is exhausted
			c.partial = c.partial[:copy(c.partial, c.partial[used:])]
			return n, nil
		}
		c.partial = c.partial[:0]
	}
	used, err := c.parse(p)
	if err != nil {
		return 0, err
	}
	c.partial = append(c.partial, p[used:]...)
	return n, nil
}

// need returns how many more bytes the element at the start of b (the
// header or one tuple) needs to be complete, 0 when it is.
func (c *binRows) need(b []byte) (int, error) {
	if !c.header {
		const fixed = 11 + 4 + 4
		if len(b) < fixed {
			return fixed - len(b), nil
		}
		ext := int(binary.BigEndian.Uint32(b[15:]))
		return max(fixed+ext-len(b), 0), nil
	}
	if c.trailer {
		return 0, nil
	}
	if len(b) < 2 {
		return 2 - len(b), nil
	}
	nf := int(int16(binary.BigEndian.Uint16(b)))
	if nf == -1 {
		return 0, nil
	}
	pos := 2
	for range nf {
		if len(b) < pos+4 {
			return pos + 4 - len(b), nil
		}
		l := int(int32(binary.BigEndian.Uint32(b[pos:])))
		pos += 4
		if l > 0 {
			pos += l
		}
	}
	return max(pos-len(b), 0), nil
}

// parse consumes the complete elements at the start of b and returns how
// many bytes they took.
func (c *binRows) parse(b []byte) (int, error) {
	used := 0
	if !c.header {
		if n, _ := c.need(b); n > 0 {
			return 0, nil
		}
		if !bytes.HasPrefix(b, binCopySignature) {
			return 0, errors.New("COPY binary output without the PGCOPY signature")
		}
		if flags := binary.BigEndian.Uint32(b[11:]); flags&(1<<16) != 0 {
			return 0, errors.New("COPY binary output with OIDs")
		}
		used = 19 + int(binary.BigEndian.Uint32(b[15:]))
		c.header = true
	}
	for used < len(b) {
		if c.trailer {
			return 0, errors.New("data after the end of COPY binary output")
		}
		t := b[used:]
		if len(t) < 2 {
			break
		}
		nf := int(int16(binary.BigEndian.Uint16(t)))
		if nf == -1 {
			c.trailer = true
			used += 2
			continue
		}
		if nf != c.ncols {
			return 0, fmt.Errorf("COPY row has %d columns, want %d", nf, c.ncols)
		}
		pos, complete := 2, true
		for i := range nf {
			if len(t) < pos+4 {
				complete = false
				break
			}
			l := int(int32(binary.BigEndian.Uint32(t[pos:])))
			pos += 4
			if l < -1 {
				return 0, fmt.Errorf("COPY binary value of length %d", l)
			}
			if l < 0 {
				c.datums[i] = decoding.Datum{Kind: decoding.DatumNull}
				continue
			}
			if len(t) < pos+l {
				complete = false
				break
			}
			c.datums[i] = decoding.Datum{Kind: decoding.DatumBinary, Data: t[pos : pos+l : pos+l]}
			pos += l
		}
		if !complete {
			break
		}
		if err := c.emit(t[:pos]); err != nil {
			return 0, err
		}
		used += pos
	}
	return used, nil
}

func (c *binRows) emit(tuple []byte) error {
	if c.tuple != nil {
		return c.tuple(tuple)
	}
	return c.row(c.datums)
}

// finish reports a truncated stream.
func (c *binRows) finish() error {
	if !c.trailer || len(c.partial) > 0 {
		return fmt.Errorf("COPY binary output ended without its end marker (%d bytes pending)", len(c.partial))
	}
	return nil
}
