package topic

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// appendCopy appends row i of a decoded batch as it is, NULLs included,
// for the first n columns (an absent column, nil in v, is NULL). It is how
// compaction moves rows: nothing is re-derived, so a row comes out of a
// rewrite exactly as it went in.
func (w *FileWriter) appendCopy(v *recordView, i int) error {
	if err := w.usable(w.opts.DeadLetter); err != nil {
		return err
	}
	st := w.current()
	w.rows.buffers()
	before := w.rows.rawSize
	for c, col := range w.cols {
		if err := w.rows.copyValue(v, col, c, i, st); err != nil {
			return w.fail(err)
		}
	}
	w.rows.rows++
	w.rows.rawSize += fixedRowSize
	st.rows++
	w.bytes += w.rows.rawSize - before
	return w.afterAppend()
}

// copyValue appends the value of column c (col) at row i, or NULL.
func (b *pendingRows) copyValue(v *recordView, col column, c, i int, st *fileStats) error {
	var null bool
	switch col.kind {
	case kindString:
		a := v.strs[c]
		if null = a == nil || a.IsNull(i); !null {
			b.putString(c, a.Value(i))
			switch {
			case c == colTopic:
				st.topic.add(a.Value(i))
			case col.name == sourceColumn.name:
				st.addSource(a.Value(i))
			}
		}
	case kindInt:
		a := v.ints[c]
		if null = a == nil || a.IsNull(i); !null {
			b.putInt32(c, a.Value(i), st)
		}
	case kindLong:
		a := v.longs[c]
		if null = a == nil || a.IsNull(i); !null {
			b.putInt64(c, a.Value(i), st)
		}
	case kindTimestamp:
		a := v.times[c]
		if null = a == nil || a.IsNull(i); !null {
			us := a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit).UnixMicro()
			b.putInt64(c, us, st)
		}
	}
	if !null {
		return nil
	}
	if !col.nullable {
		return fmt.Errorf("column %s is NULL in a row, but the table declares it NOT NULL", col.name)
	}
	b.putNull(col.kind, c, st)
	return nil
}

// putNull appends a NULL to column c of kind k.
func (b *pendingRows) putNull(k kind, c int, st *fileStats) {
	if k == kindString {
		b.putNullString(c, st)
		return
	}
	col := &b.bufs.cols[c]
	if k == kindInt {
		col.i32 = append(col.i32, 0)
	} else {
		col.i64 = append(col.i64, 0)
	}
	col.markNull(b.rows)
	st.nulls[c]++
}
