package topic

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
)

// stage holds pending rows a FileWriter moved out of memory, in order, in
// a local temporary file (unlinked at once: it lives as long as the open
// descriptor): BoundPending stages a topic's few pending rows instead of
// encoding them as a tiny row group, whose Parquet metadata (kilobytes per
// row group, kept until the file's footer) would cost more memory than the
// rows and much more CPU. The rows are restored, before any newer row,
// when the writer next encodes (flushRowGroup), as row groups of a sound
// size. Their statistics were counted when they were appended.
type stage struct {
	f      *os.File
	size   int64
	chunks []stagedChunk
	rows   int   // rows staged
	raw    int64 // their pendingRows.rawSize
}

type stagedChunk struct {
	off, n int64
	rows   int
	raw    int64 // pendingRows.rawSize of the chunk
}

// restoreRowGroupBytes bounds the row groups restored rows are encoded in,
// so a commit that restores many staged rows holds little at once.
const restoreRowGroupBytes = 8 << 20

// add writes the pending rows as one chunk: per column, six lengths (data,
// offsets, int32s, int64s, validity bytes, nulls), a bitmap flag, then the
// buffers as they are in memory (read back by this process only).
func (s *stage) add(b *pendingRows, ncols int) error {
	b.settle()
	var hdr []byte
	size := 0
	for c := range ncols {
		col := &b.bufs.cols[c]
		size += 7*8 + len(col.data) + 4*len(col.offs) + 4*len(col.i32) + 8*len(col.i64) + len(col.valid)
	}
	buf := make([]byte, 0, size)
	for c := range ncols {
		col := &b.bufs.cols[c]
		hdr = hdr[:0]
		for _, n := range []int{len(col.data), len(col.offs), len(col.i32), len(col.i64), len(col.valid), col.nulls} {
			hdr = binary.LittleEndian.AppendUint64(hdr, uint64(n))
		}
		flag := uint64(0)
		if col.bitmap {
			flag = 1
		}
		hdr = binary.LittleEndian.AppendUint64(hdr, flag)
		buf = append(buf, hdr...)
		buf = append(buf, col.data...)
		buf = append(buf, arrow.Int32Traits.CastToBytes(col.offs)...)
		buf = append(buf, arrow.Int32Traits.CastToBytes(col.i32)...)
		buf = append(buf, arrow.Int64Traits.CastToBytes(col.i64)...)
		buf = append(buf, col.valid...)
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "deltabus-stage-*.tmp")
		if err != nil {
			return fmt.Errorf("stage pending rows: temporary file: %w", err)
		}
		os.Remove(f.Name()) // lives on until Close
		s.f = f
	}
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		return fmt.Errorf("stage pending rows in %s: %w", os.TempDir(), err)
	}
	s.chunks = append(s.chunks, stagedChunk{off: s.size, n: int64(len(buf)), rows: b.rows, raw: b.rawSize})
	s.size += int64(len(buf))
	s.rows += b.rows
	s.raw += b.rawSize
	return nil
}

// restore appends a staged chunk's rows to b, after its rows.
func (s *stage) restore(ch stagedChunk, b *pendingRows, ncols int) error {
	buf := make([]byte, ch.n)
	if _, err := s.f.ReadAt(buf, ch.off); err != nil {
		return fmt.Errorf("read staged rows back: %w", err)
	}
	if b.bufs == nil {
		b.bufs = &rowBuffers{oneOff: true}
	}
	b.settle()
	for c := range ncols {
		var n [7]int
		for i := range n {
			if len(buf) < 8 {
				return fmt.Errorf("staged rows are truncated")
			}
			n[i] = int(binary.LittleEndian.Uint64(buf))
			buf = buf[8:]
		}
		take := func(k int) ([]byte, error) {
			if k < 0 || k > len(buf) {
				return nil, fmt.Errorf("staged rows are truncated")
			}
			out := buf[:k]
			buf = buf[k:]
			return out, nil
		}
		data, err1 := take(n[0])
		offs, err2 := take(4 * n[1])
		i32, err3 := take(4 * n[2])
		i64, err4 := take(8 * n[3])
		valid, err5 := take(n[4])
		if err := firstErr(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		b.bufs.cols[c].appendChunk(data, arrow.Int32Traits.CastFromBytes(offs), arrow.Int32Traits.CastFromBytes(i32),
			arrow.Int64Traits.CastFromBytes(i64), valid, n[6] == 1, b.rows, ch.rows)
	}
	b.rows += ch.rows
	b.rawSize += ch.raw
	return nil
}

// appendRows appends src's rows to b, in memory.
func (b *pendingRows) appendRows(src *pendingRows, ncols int) {
	if b.bufs == nil {
		b.bufs = &rowBuffers{oneOff: true}
	}
	b.settle()
	src.settle()
	for c := range ncols {
		s := &src.bufs.cols[c]
		b.bufs.cols[c].appendChunk(s.data, s.offs, s.i32, s.i64, s.valid, s.bitmap, b.rows, src.rows)
	}
	b.rows += src.rows
	b.rawSize += src.rawSize
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// appendChunk appends a chunk of n rows (buffers laid out as colBuf's) to a
// column holding rows rows.
func (c *colBuf) appendChunk(data []byte, offs, i32 []int32, i64 []int64, valid []byte, bitmap bool, rows, n int) {
	if len(offs) > 0 {
		if len(c.offs) == 0 {
			c.offs = append(c.offs, 0)
		}
		base := int32(len(c.data)) - offs[0]
		for _, o := range offs[1:] {
			c.offs = append(c.offs, o+base)
		}
		c.data = append(c.data, data...)
	}
	c.i32 = append(c.i32, i32...)
	c.i64 = append(c.i64, i64...)
	if !bitmap && !c.bitmap {
		return
	}
	for i := range n {
		if !bitmap || valid[i>>3]&(1<<(i&7)) != 0 {
			c.markValid(rows + i)
		} else {
			c.markNull(rows + i)
		}
	}
}

func (s *stage) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}
