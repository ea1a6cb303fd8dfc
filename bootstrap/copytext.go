package bootstrap

import (
	"bytes"
	"fmt"

	"github.com/deltabus/deltabus/decoding"
)

// copyRows parses COPY ... TO STDOUT text format as pgconn hands it over
// (any split of the byte stream) into tuples of text datums, the form
// pgoutput sends, and calls row for each. Datum data aliases internal
// buffers and is valid only during the call.
type copyRows struct {
	ncols   int
	row     func([]decoding.Datum) error
	partial []byte // an incomplete line carried over from the last Write
	datums  []decoding.Datum
	scratch []byte // unescaped values of the current line
}

func newCopyRows(ncols int, row func([]decoding.Datum) error) *copyRows {
	return &copyRows{ncols: ncols, row: row, datums: make([]decoding.Datum, ncols)}
}

// Write consumes complete lines and keeps the rest for the next call.
func (c *copyRows) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			return n, nil
		}
		c.partial = append(c.partial, p[:i]...)
		if err := c.line(c.partial); err != nil {
			return 0, err
		}
		c.partial = c.partial[:0]
		p = p[i+1:]
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			break
		}
		if err := c.line(p[:i]); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// finish reports a truncated stream.
func (c *copyRows) finish() error {
	if len(c.partial) > 0 {
		return fmt.Errorf("COPY output ended inside a row (%d bytes)", len(c.partial))
	}
	return nil
}

// line splits one row on tabs and unescapes its values.
func (c *copyRows) line(b []byte) error {
	c.scratch = c.scratch[:0]
	if need := len(b); cap(c.scratch) < need {
		c.scratch = make([]byte, 0, need*2)
	}
	col := 0
	for {
		i := bytes.IndexByte(b, '\t')
		field := b
		if i >= 0 {
			field = b[:i]
		}
		if col >= c.ncols {
			return fmt.Errorf("COPY row has more than %d columns", c.ncols)
		}
		c.datums[col] = c.datum(field)
		col++
		if i < 0 {
			break
		}
		b = b[i+1:]
	}
	if col != c.ncols {
		return fmt.Errorf("COPY row has %d columns, want %d", col, c.ncols)
	}
	return c.row(c.datums)
}

func (c *copyRows) datum(f []byte) decoding.Datum {
	if len(f) == 2 && f[0] == '\\' && f[1] == 'N' {
		return decoding.Datum{Kind: decoding.DatumNull}
	}
	if bytes.IndexByte(f, '\\') < 0 {
		return decoding.Datum{Kind: decoding.DatumText, Data: f[:len(f):len(f)]}
	}
	start := len(c.scratch)
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if ch != '\\' || i+1 == len(f) {
			c.scratch = append(c.scratch, ch)
			continue
		}
		i++
		switch f[i] {
		case 'b':
			ch = '\b'
		case 'f':
			ch = '\f'
		case 'n':
			ch = '\n'
		case 'r':
			ch = '\r'
		case 't':
			ch = '\t'
		case 'v':
			ch = '\v'
		default: // \\ and any other escaped character stand for themselves
			ch = f[i]
		}
		c.scratch = append(c.scratch, ch)
	}
	return decoding.Datum{Kind: decoding.DatumText, Data: c.scratch[start:len(c.scratch):len(c.scratch)]}
}
