package topic

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// pendingRows holds the rows of the next row group column by column in
// plain Go slices, which parquetpage encodes as they are (encode.go).
// Arrow's builders would zero and regrow their buffers for every row group
// (a third of a bulk copy's CPU); these slices are reused instead,
// through a pool shared by every writer in the process, so many writers
// encoding in turn share a few sets of buffers and the memory held stays
// about what is pending. The pool is a free list the collector does not
// empty (rowBufferFree).
type pendingRows struct {
	bufs    *rowBuffers // nil while no row is pending
	rows    int         // rows pending
	rawSize int64       // approximate bytes pending
	lastCap int         // capacity of the buffers this writer last released
	// taken is the capacity the buffers had when they came from the free
	// list as this topic's own (at most lastCap, which the topic's
	// previous writer held and counted; 0 for new buffers and for a writer
	// without such a hint): countedBytes leaves its unused part out of the
	// batch's budget.
	taken int
}

// rowBuffers is one row group's worth of column buffers.
type rowBuffers struct {
	cols [numDeadLetterCols]colBuf
	// oneOff buffers are dropped on release, never pooled: they hold a
	// topic's restored rows (stage.restore), a row group of one topic
	// at commit, and the pool would hand them to the next writer that
	// starts a row group, typically a topic of the next batch with a
	// row or two, whose PendingBytes would not count them.
	oneOff bool
}

// colBuf holds the pending values of one column: strings as Arrow's
// offsets and data, fixed-width values as a slice, and a validity bitmap
// only once a value is null.
type colBuf struct {
	data   []byte
	offs   []int32
	i32    []int32
	i64    []int64
	valid  []byte
	bitmap bool // valid is in use: some value of the row group is null
	nulls  int
	// rep is the value of every row while the row group's rows all hold
	// it (putSource): repN counts them, and data and offs hold nothing
	// until another value or a NULL comes (settle).
	rep  string
	repN int
}

// rowBufferPool keeps released buffers for the next row group. A
// sync.Pool would not do: it is emptied by every second collection, and a
// relay draining a backlog collects several times a second, so each batch
// regrew its buffers (putString's appends were 46% of the bytes the relay
// allocated in a 1,000-row drain).
var rowBufferPool = &rowBufferFree{}

// keptBufferBytes caps what the free list holds: a few topics' row groups.
// A set of buffers that would pass it is left to the collector, so one row
// group of huge values does not pin its memory.
const keptBufferBytes = 32 << 20

// rowBufferFree is a free list of row buffers holding at most
// keptBufferBytes of capacity.
type rowBufferFree struct {
	mu    sync.Mutex
	free  []freeSet
	bytes int
}

// freeSet is a released set and its capacity.
type freeSet struct {
	b    *rowBuffers
	size int
}

// getScan bounds how many of the newest sets Get looks at: a free list of
// a thousand small sets (a batch over many topics) is not scanned for
// every writer.
const getScan = 64

// freshSetBytes is the capacity any writer may take from the free list:
// about what a row group of a few rows grows on its own.
const freshSetBytes = 32 << 10

// Get returns a set of empty buffers: the largest of the getScan newest
// released whose capacity is at most limit (the newest of equals), or a
// new one. The limit is what the writer, or its topic's writer of the
// previous batch (FileOptions.BufferHint), held last (pendingRows.lastCap):
// a topic whose row groups are large gets large buffers back, while a
// topic starting with a row or two does not take, and hold uncounted,
// buffers a larger row group left: its PendingBytes counts its rows, not
// the capacity it holds, and a thousand such topics held 300 MiB.
func (f *rowBufferFree) Get(limit int) *rowBuffers {
	f.mu.Lock()
	defer f.mu.Unlock()
	best := -1
	for i := len(f.free) - 1; i >= max(0, len(f.free)-getScan); i-- {
		if size := f.free[i].size; size <= limit && (best < 0 || size > f.free[best].size) {
			best = i
		}
	}
	if best < 0 {
		return new(rowBuffers)
	}
	set := f.free[best]
	f.free = slices.Delete(f.free, best, best+1)
	f.bytes -= set.size
	return set.b
}

// buffers makes sure b has buffers for its next row.
func (b *pendingRows) buffers() {
	if b.bufs == nil {
		b.bufs = rowBufferPool.Get(max(b.lastCap, freshSetBytes))
		b.taken = 0
		if b.lastCap > freshSetBytes {
			b.taken = min(b.bufs.capBytes(), b.lastCap)
		}
	}
}

// Put keeps reset buffers for reuse unless that would pass
// keptBufferBytes.
func (f *rowBufferFree) Put(b *rowBuffers) {
	size := b.capBytes()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bytes+size > keptBufferBytes {
		return
	}
	f.free = append(f.free, freeSet{b, size})
	f.bytes += size
}

func (b *rowBuffers) capBytes() int {
	total := 0
	for i := range b.cols {
		total += b.cols[i].capBytes()
	}
	return total
}

// fixedRowSize approximates the bytes of the fixed-width columns of a row.
const fixedRowSize = 4 + 4 + 8 + 8 + 8 + 8 + 8

// appendEvent appends an event; source goes to the column at srcCol (NULL
// when empty). own says source is the writer's own, the same string for
// every row (FileOptions.Source): it is then counted, not copied, while
// the row group holds no other (putSource), and widens the file's
// statistics once.
func (b *pendingRows) appendEvent(e *outbox.Event, source string, own bool, srcCol int, st *fileStats) {
	b.buffers()
	b.putString(colEventID, e.ID)
	b.putString(colTopic, e.Topic)
	st.topic.add(e.Topic)
	b.putString(colKey, e.Key)
	b.putString(colType, e.Type)
	b.putInt32(colSchemaVersion, e.SchemaVersion, st)
	b.putString(colPayload, e.Payload)
	if e.Headers == nil {
		b.putNullString(colHeaders, st)
	} else {
		b.putString(colHeaders, *e.Headers)
	}
	b.putTime(colOccurredAt, e.OccurredAt, st)
	b.putInt64(colCommitLSN, e.CommitLSN, st)
	b.putInt32(colSeq, e.Seq, st)
	b.putInt64(colXid, e.Xid, st)
	b.putTime(colCommitTime, e.CommitTime, st)
	switch {
	case source == "":
		b.putNullString(srcCol, st)
	case own:
		b.putSource(srcCol, source)
		if !st.ownSource {
			st.addSource(source)
			st.ownSource = true
		}
	default:
		b.putSource(srcCol, source)
		st.addSource(source)
	}
	b.rows++
	b.rawSize += fixedRowSize
	st.rows++
}

func (b *pendingRows) appendDeadLetter(d *outbox.DeadLetter, source string, own bool, st *fileStats) {
	b.buffers()
	b.putString(colReason, d.Reason)
	b.putString(colSourceTable, d.SourceTable)
	b.putString(colRawRow, d.RawRow)
	b.appendEvent(&d.Event, source, own, colDeadLetterSource, st)
}

// putSource appends v to a column that usually holds one value (the
// source): while every row of the row group holds v, the rows are
// counted, not copied (colBuf.rep), and the encoder writes the value once
// (parquetpage.Column.Repeat). In a 1,000-row drain the copy, and the
// encoder's comparison of each row with the one before, were 2-3% of the
// relay's CPU.
func (b *pendingRows) putSource(col int, v string) {
	c := &b.bufs.cols[col]
	switch {
	case b.rows == 0 && len(c.offs) == 0 && !c.bitmap:
		c.rep, c.repN = strings.Clone(v), 1 // v may alias a buffer its caller reuses
	case c.repN > 0 && c.repN == b.rows && v == c.rep:
		c.repN++
	default:
		b.putString(col, v)
		return
	}
	b.rawSize += int64(len(v))
}

// settle copies a counted value into the column's buffers, once per row
// (putSource), before anything else is appended or the buffers are read.
func (c *colBuf) settle() {
	if c.repN == 0 {
		return
	}
	n := c.repN
	c.repN = 0
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	c.data = slices.Grow(c.data, n*len(c.rep))
	c.offs = slices.Grow(c.offs, n)
	for range n {
		c.data = append(c.data, c.rep...)
		c.offs = append(c.offs, int32(len(c.data)))
	}
	c.rep = ""
}

// settle settles every column (colBuf.settle): the rows are then in the
// buffers as they are read.
func (b *pendingRows) settle() {
	if b.bufs == nil {
		return
	}
	for i := range b.bufs.cols {
		b.bufs.cols[i].settle()
	}
}

func (b *pendingRows) putString(col int, v string) {
	c := &b.bufs.cols[col]
	c.settle()
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	if cap(c.data) < len(c.data)+len(v) {
		// Double: append grows a large slice by a quarter, which copies
		// a column of megabytes four times over as it fills.
		c.data = slices.Grow(c.data, max(len(v), len(c.data)))
	}
	c.data = append(c.data, v...)
	c.offs = append(c.offs, int32(len(c.data)))
	c.markValid(b.rows)
	b.rawSize += int64(len(v))
}

func (b *pendingRows) putNullString(col int, st *fileStats) {
	c := &b.bufs.cols[col]
	c.settle()
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	c.offs = append(c.offs, int32(len(c.data)))
	c.markNull(b.rows)
	st.nulls[col]++
}

func (b *pendingRows) putInt32(col int, v int32, st *fileStats) {
	c := &b.bufs.cols[col]
	c.i32 = append(c.i32, v)
	c.markValid(b.rows)
	st.bound[col].add(int64(v))
}

func (b *pendingRows) putInt64(col int, v int64, st *fileStats) {
	c := &b.bufs.cols[col]
	c.i64 = append(c.i64, v)
	c.markValid(b.rows)
	st.bound[col].add(v)
}

// putTime appends t in microseconds; the zero time means "unknown" (a dead
// letter whose timestamp could not be read) and is stored as NULL.
func (b *pendingRows) putTime(col int, t time.Time, st *fileStats) {
	c := &b.bufs.cols[col]
	if t.IsZero() {
		c.i64 = append(c.i64, 0)
		c.markNull(b.rows)
		st.nulls[col]++
		return
	}
	us := t.UnixMicro()
	c.i64 = append(c.i64, us)
	c.markValid(b.rows)
	st.bound[col].add(us)
}

// markValid records that row holds a value; without a bitmap every row
// does, and nothing is recorded.
func (c *colBuf) markValid(row int) {
	if !c.bitmap {
		return
	}
	c.growBitmap(row)
	c.valid[row>>3] |= 1 << (row & 7)
}

// markNull records that row is null, starting the bitmap (every earlier
// row valid) at the column's first null.
func (c *colBuf) markNull(row int) {
	if !c.bitmap {
		c.bitmap = true
		c.valid = c.valid[:0]
		for range row >> 3 {
			c.valid = append(c.valid, 0xff)
		}
		if row&7 != 0 {
			c.valid = append(c.valid, byte(1)<<(row&7)-1)
		}
	}
	c.growBitmap(row)
	c.nulls++
}

func (c *colBuf) growBitmap(row int) {
	for len(c.valid) <= row>>3 {
		c.valid = append(c.valid, 0)
	}
}

func (c *colBuf) reset() {
	c.data, c.offs, c.i32, c.i64, c.valid = c.data[:0], c.offs[:0], c.i32[:0], c.i64[:0], c.valid[:0]
	c.bitmap, c.nulls = false, 0
	c.rep, c.repN = "", 0
}

func (c *colBuf) capBytes() int {
	return cap(c.data) + 4*cap(c.offs) + 4*cap(c.i32) + 8*cap(c.i64) + cap(c.valid)
}

// heldBytes is the capacity of the buffers the pending rows are in.
func (b *pendingRows) heldBytes() int64 {
	if b.bufs == nil {
		return 0
	}
	return int64(b.bufs.capBytes())
}

// countedBytes is what the pending rows count against a batch's memory
// budget: the capacity of their buffers, less the part that no row uses yet
// of the capacity the topic took back as its own (FileOptions.BufferHint:
// as large as its previous writer held, and counted, last). Counting that
// whole made a batch of a few busy topics pass the budget at its first
// rows, and BoundPending then staged those rows and dropped the buffers,
// to grow them again from nothing, every batch (a tenth of a 1,000-row
// drain's relay CPU). Capacity a writer grew, buffers a writer without a
// hint took (a new topic, any of a thousand), and every used byte count.
func (b *pendingRows) countedBytes() int64 {
	if b.bufs == nil {
		return b.rawSize
	}
	unused := max(0, int64(b.taken)-b.rawSize)
	return max(b.rawSize, int64(b.bufs.capBytes())-unused)
}

// drop drops the pending rows and their buffers, leaving them to the
// collector.
func (b *pendingRows) drop() { b.bufs, b.rows, b.rawSize, b.taken = nil, 0, 0, 0 }

// release drops the pending rows and returns the buffers to the pool.
func (b *pendingRows) release() {
	if b.bufs == nil {
		return
	}
	b.lastCap = b.bufs.capBytes()
	if !b.bufs.oneOff {
		for i := range b.bufs.cols {
			b.bufs.cols[i].reset()
		}
		rowBufferPool.Put(b.bufs)
	}
	b.bufs, b.rows, b.rawSize, b.taken = nil, 0, 0, 0
}
