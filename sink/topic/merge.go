package topic

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/storage"
)

// pos is a row's place in source commit order: (commit_lsn, seq). seq is
// widened so that bounds can lie below or above every int32.
type pos struct{ lsn, seq int64 }

func (a pos) cmp(b pos) int {
	if c := cmp.Compare(a.lsn, b.lsn); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

var minSeq, maxSeq = int64(math.MinInt32) - 1, int64(math.MaxInt32) + 1

// mergeBatchRows is the number of rows a merge input decodes at a time.
const mergeBatchRows = 1024

// cursor reads one data file row by row, in file order, checking that the
// rows come in (commit_lsn, seq) order (of each topic, when perTopic) and
// that their number is the one the log recorded.
type cursor struct {
	in       inputFile
	ord      int            // position in the merge's input order, breaks ties
	perTopic map[string]pos // the last row of each topic; nil: one order for the file
	pf       *file.Reader
	rr       pqarrow.RecordReader
	view     *recordView
	list     []column // the table's columns
	want     []int    // the table's columns the file has
	n, i     int
	at       pos
	read     int64
}

// openCursor reads the file of in and positions the cursor on its first
// row; it returns nil for a file without rows.
func openCursor(ctx context.Context, store storage.Store, in inputFile, list []column, ord int, perTopic bool) (*cursor, error) {
	key, err := url.PathUnescape(in.add.Path)
	if err != nil {
		return nil, fmt.Errorf("data file path %q: %w", in.add.Path, err)
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read data file %s: %w", key, err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("open parquet %s: %w", key, err)
	}
	c := &cursor{in: in, ord: ord, pf: pf}
	if perTopic {
		c.perTopic = map[string]pos{}
	}
	if err := c.start(ctx, list); err != nil {
		c.close()
		return nil, fmt.Errorf("read data file %s: %w", key, err)
	}
	ok, err := c.next()
	if err != nil || !ok {
		c.close()
		if err != nil {
			return nil, fmt.Errorf("read data file %s: %w", key, err)
		}
		return nil, nil
	}
	return c, nil
}

// start opens a record reader over the table's columns the file has; a
// nullable column the file lacks (written before the column was added)
// reads as NULL.
func (c *cursor) start(ctx context.Context, list []column) error {
	want, leaves, err := presentColumns(c.pf, list, seq(0, len(list)))
	if err != nil {
		return err
	}
	if !slices.Contains(want, colCommitLSN) || !slices.Contains(want, colSeq) {
		return fmt.Errorf("no commit_lsn or seq column")
	}
	// Readers allocate a batch's worth of buffers per column up front:
	// a small file gets a small batch.
	batch := min(int64(mergeBatchRows), max(c.pf.NumRows(), 1))
	fr, err := pqarrow.NewFileReader(c.pf, pqarrow.ArrowReadProperties{BatchSize: batch}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	if c.rr, err = fr.GetRecordReader(ctx, leaves, nil); err != nil {
		return err
	}
	c.list, c.want, c.i, c.n = list, want, -1, 0
	return nil
}

// next moves to the next row; false at the end of the file.
func (c *cursor) next() (bool, error) {
	c.i++
	for c.i >= c.n {
		if !c.rr.Next() {
			if err := c.rr.Err(); err != nil {
				return false, err
			}
			if c.read != c.in.rows {
				return false, fmt.Errorf("data file %s holds %d rows, the log says %d", c.in.add.Path, c.read, c.in.rows)
			}
			return false, nil
		}
		rec := c.rr.RecordBatch()
		v, err := newRecordView(rec, c.list, c.want)
		if err != nil {
			return false, err
		}
		c.view, c.i, c.n = v, 0, int(rec.NumRows())
	}
	lsn, seq := c.view.longs[colCommitLSN], c.view.ints[colSeq]
	if lsn.IsNull(c.i) || seq.IsNull(c.i) {
		return false, fmt.Errorf("data file %s has a row without commit_lsn or seq", c.in.add.Path)
	}
	at := pos{lsn.Value(c.i), int64(seq.Value(c.i))}
	if !c.inOrder(at) {
		return false, fmt.Errorf("data file %s is not in (commit_lsn, seq) order at row %d", c.in.add.Path, c.read)
	}
	if at.cmp(c.in.lo) < 0 || at.cmp(c.in.hi) > 0 {
		return false, fmt.Errorf("data file %s has a row outside its logged commit_lsn/seq bounds", c.in.add.Path)
	}
	c.at = at
	c.read++
	return true, nil
}

// inOrder reports whether the current row, at at, comes after the rows
// before it: of the file, or of its topic when the cursor checks order per
// topic (a group table's file needs only each topic's rows in order).
func (c *cursor) inOrder(at pos) bool {
	if c.perTopic == nil {
		return c.read == 0 || at.cmp(c.at) >= 0
	}
	name := topicAt(c.view, c.i)
	last, seen := c.perTopic[name]
	c.perTopic[name] = at
	return !seen || at.cmp(last) >= 0
}

// topicAt returns the topic column of row i, "" when NULL or absent.
func topicAt(v *recordView, i int) string {
	if a := v.strs[colTopic]; a != nil && !a.IsNull(i) {
		return a.Value(i)
	}
	return ""
}

func (c *cursor) close() {
	if c.rr != nil {
		c.rr.Release()
	}
	c.pf.Close()
}

// cursorHeap orders open cursors by their current row.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := h[i].at.cmp(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].ord < h[j].ord
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// rowSink takes the rows of a merge, in merge order: a FileWriter, or a
// topicSplit (one writer per topic).
type rowSink interface {
	appendRow(v *recordView, i int) error
}

// mergeInto appends the rows of files, sorted by their lower bound, to out
// in (commit_lsn, seq) order and returns how many it appended; cols are
// the table's columns. A file is opened only when the merge reaches its
// lower bound and closed at its end, so only files whose ranges overlap
// are open together. perTopic: each file is checked for order per topic,
// and out checks what it writes (topicSplit).
func mergeInto(ctx context.Context, store storage.Store, out rowSink, cols []column, files []inputFile, perTopic bool) (n int64, err error) {
	h := &cursorHeap{}
	defer func() {
		for _, c := range *h {
			c.close()
		}
	}()
	next := 0
	for {
		for next < len(files) && (h.Len() == 0 || files[next].lo.cmp((*h)[0].at) <= 0) {
			c, err := openCursor(ctx, store, files[next], cols, next, perTopic)
			if err != nil {
				return n, err
			}
			switch {
			case c != nil && files[next].drain:
				d, err := drain(c, out)
				if n += d; err != nil {
					return n, err
				}
			case c != nil:
				heap.Push(h, c)
			}
			next++
		}
		if h.Len() == 0 {
			return n, ctx.Err()
		}
		c := (*h)[0]
		if err := out.appendRow(c.view, c.i); err != nil {
			return n, err
		}
		n++
		ok, err := c.next()
		if err != nil {
			return n, err
		}
		if ok {
			heap.Fix(h, 0)
			continue
		}
		heap.Pop(h).(*cursor).close()
		if err := ctx.Err(); err != nil {
			return n, err
		}
	}
}

// drain appends every row of c to out and closes it: a file of a group
// table's split that no other file may share a topic with within its
// range (inputFile.drain) is copied whole when the merge reaches it.
func drain(c *cursor, out rowSink) (n int64, err error) {
	defer c.close()
	for ok := true; ok; ok, err = c.next() {
		if err := out.appendRow(c.view, c.i); err != nil {
			return n, err
		}
		n++
	}
	return n, err
}
