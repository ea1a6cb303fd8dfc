package topic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/parquetpage"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Defaults of FileOptions.
const (
	DefaultRowGroupRows  = 64 << 10
	DefaultRowGroupBytes = 32 << 20
	DefaultMaxFileRows   = 1_000_000
	DefaultMaxFileBytes  = 32 << 20
	DefaultMemoryBuffer  = 8 << 20
)

// FileOptions bound the memory and the size of the files a FileWriter makes.
// Zero fields take the defaults above.
type FileOptions struct {
	// DeadLetter selects the dead-letter schema (AppendDeadLetter); otherwise
	// the event schema (Append).
	DeadLetter bool
	// Source is written into every row's source column: the appId of the
	// relay whose source the rows come from. Empty: each event's own
	// Source (rows copied from elsewhere), NULL when that is empty too.
	Source string
	// RowGroupRows and RowGroupBytes close a row group: pending rows are
	// encoded into the current file when either is reached. RowGroupBytes
	// counts the raw appended bytes (strings plus fixed-width columns).
	RowGroupRows  int
	RowGroupBytes int64
	// MaxFileRows and MaxFileBytes close a file and start the next one.
	// MaxFileBytes counts encoded (compressed) bytes and is checked after
	// each row group, so a file may exceed it by one row group. Because
	// a file beyond MemoryBuffer is written to the store as it grows, a
	// large MaxFileBytes costs no memory.
	MaxFileRows  int
	MaxFileBytes int64
	// MemoryBuffer is how much of a file being written stays in memory;
	// beyond it the file is written to the store as it grows
	// (storage.Store.Create) and committed on Close.
	MemoryBuffer int64
	// BufferHint is the capacity of the row buffers this topic's writer
	// last released (FileWriter.BufferCap of the previous batch's writer):
	// the writer may take buffers that large from the shared pool for its
	// first row group, instead of growing small ones from nothing batch
	// after batch (a copy of every pending byte and a collection's worth
	// of garbage each time). Zero: small buffers only.
	BufferHint int
}

func (o FileOptions) withDefaults() FileOptions {
	orDefault(&o.RowGroupRows, DefaultRowGroupRows)
	orDefault(&o.RowGroupBytes, DefaultRowGroupBytes)
	orDefault(&o.MaxFileRows, DefaultMaxFileRows)
	orDefault(&o.MaxFileBytes, DefaultMaxFileBytes)
	orDefault(&o.MemoryBuffer, DefaultMemoryBuffer)
	return o
}

// orDefault sets a zero or negative option to its default.
func orDefault[T int | int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// dataFile is one parquet file, open or finished.
type dataFile struct {
	name  string
	buf   *spillBuffer
	pf    *parquetpage.File // nil until the first row group
	stats fileStats
}

// FileWriter streams events of one topic into parquet data files under the
// table root and, on Close, uploads them and returns their add actions. Rows
// keep the order in which they were appended, within a file and across the
// returned adds. A FileWriter is not safe for concurrent use.
type FileWriter struct {
	store  storage.Store
	opts   FileOptions
	cols   []column
	enc    *parquetpage.Schema
	rows   *pendingRows
	stage  *stage // rows moved out of memory, before the pending ones
	cur    *dataFile
	done   []*dataFile
	total  int
	bytes  int64
	err    error // sticky: after a failure only Abort and Close (which reports it) work
	closed bool
}

// NewFileWriter returns a writer of data files for the topic table whose
// root is store (see storage.Sub).
func NewFileWriter(store storage.Store, opts FileOptions) *FileWriter {
	opts = opts.withDefaults()
	return &FileWriter{
		store: store,
		opts:  opts,
		cols:  tableColumns(opts.DeadLetter),
		enc:   fileEncoding(opts.DeadLetter),
		rows:  &pendingRows{lastCap: opts.BufferHint},
	}
}

// BufferCap is the capacity of the row buffers the writer last released:
// after Close, the BufferHint for the topic's next writer.
func (w *FileWriter) BufferCap() int { return w.rows.lastCap }

// Rows returns the number of rows appended so far.
func (w *FileWriter) Rows() int { return w.total }

// Bytes returns the approximate raw size of the rows appended so far
// (string bytes plus fixed-width columns), for batching decisions.
func (w *FileWriter) Bytes() int64 { return w.bytes }

// PendingBytes returns the raw size of the rows appended but not yet
// encoded into a row group: the memory this writer holds for them.
func (w *FileWriter) PendingBytes() int64 { return w.rows.rawSize }

// BufferedBytes returns the encoded bytes of this writer's files that are
// held in memory (files not yet spilled to the store).
func (w *FileWriter) BufferedBytes() int64 {
	var n int64
	if w.cur != nil {
		n += w.cur.buf.InMemory()
	}
	for _, f := range w.done {
		n += f.buf.InMemory()
	}
	return n
}

// MemoryBytes is what the writer holds in memory for its rows: pending
// rows plus encoded files not yet spilled.
//
// Pending rows count at the capacity of the buffers they are in, not only
// their length: a writer that took a buffer another topic grew (the free
// list hands them round) holds all of it for a few rows, and a batch of
// many topics filling while the previous one closes would otherwise hold
// hundreds of megabytes the budget never saw (issue 30: 226 MB of 339).
func (w *FileWriter) MemoryBytes() int64 {
	return w.rows.countedBytes() + w.BufferedBytes()
}

// minSpill is the smallest in-memory file BoundPending writes to the store
// early: each spilled file holds a temporary file (a descriptor) until the
// commit.
const minSpill = 64 << 10

// minRowGroup is the least of pending rows BoundPending encodes as a row
// group; fewer are staged (stage.go) and encoded later with the others. A
// row group's metadata is a few kilobytes: at 128 KiB it costs a few
// percent; staging costs a copy out and back (a 40-topic bootstrap, whose
// topics hold about 200 KiB each, ran 15-20% slower staging everything).
const minRowGroup = 128 << 10

// SpillFiles writes the writer's in-memory files to the store now
// (storage.Store.Create: local work until Close commits them), so they no
// longer cost memory.
func (w *FileWriter) SpillFiles() error {
	if w.closed || w.err != nil {
		return w.err
	}
	files := w.done
	if w.cur != nil {
		files = append(files[:len(files):len(files)], w.cur)
	}
	for _, f := range files {
		if f.buf.InMemory() > 0 {
			if err := f.buf.spill(); err != nil {
				return w.fail(err)
			}
		}
	}
	return nil
}

// FlushRowGroup encodes the pending rows now, as a row group of the open
// file. A caller that runs many writers at once uses it to keep their total
// memory bounded, whatever the number of topics.
func (w *FileWriter) FlushRowGroup() error {
	if w.closed || w.err != nil || (w.rows.rows == 0 && w.stage == nil) {
		return w.err
	}
	if err := w.flushRowGroup(); err != nil {
		return w.fail(err)
	}
	if w.cur.buf.Len() >= w.opts.MaxFileBytes {
		if err := w.finishFile(); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// Append adds one event. It fails on a dead-letter writer.
func (w *FileWriter) Append(e *outbox.Event) error {
	if err := w.usable(false); err != nil {
		return err
	}
	before := w.rows.rawSize
	src, own := w.sourceOf(e)
	w.rows.appendEvent(e, src, own, colSource, w.current())
	w.bytes += w.rows.rawSize - before
	return w.afterAppend()
}

// AppendDeadLetter adds one dead letter. It fails on an event writer.
func (w *FileWriter) AppendDeadLetter(d *outbox.DeadLetter) error {
	if err := w.usable(true); err != nil {
		return err
	}
	before := w.rows.rawSize
	src, own := w.sourceOf(&d.Event)
	w.rows.appendDeadLetter(d, src, own, w.current())
	w.bytes += w.rows.rawSize - before
	return w.afterAppend()
}

// sourceOf is the source column of e: the writer's own (FileOptions.Source:
// the same string for every row, own) or the event's.
func (w *FileWriter) sourceOf(e *outbox.Event) (src string, own bool) {
	if w.opts.Source != "" {
		return w.opts.Source, true
	}
	return e.Source, false
}

func (w *FileWriter) usable(deadLetter bool) error {
	switch {
	case w.closed:
		return errors.New("append to a closed topic file writer")
	case w.err != nil:
		return w.err
	case deadLetter != w.opts.DeadLetter:
		return fmt.Errorf("append: writer schema is dead-letter=%t, row is dead-letter=%t", w.opts.DeadLetter, deadLetter)
	}
	return nil
}

// current returns the stats of the open file, starting a file if none is open.
func (w *FileWriter) current() *fileStats {
	if w.cur == nil {
		name := fmt.Sprintf("part-%05d-%s.c000.snappy.parquet", len(w.done), uuid.NewString())
		w.cur = &dataFile{name: name, buf: &spillBuffer{store: w.store, key: name, memLimit: w.opts.MemoryBuffer}}
	}
	return &w.cur.stats
}

func (w *FileWriter) afterAppend() error {
	w.total++
	fileFull := w.cur.stats.rows >= int64(w.opts.MaxFileRows)
	if !fileFull && w.rows.rows < w.opts.RowGroupRows && w.rows.rawSize < w.opts.RowGroupBytes && !w.stageFull() {
		return nil
	}
	if err := w.flushRowGroup(); err != nil {
		return w.fail(err)
	}
	if fileFull || w.cur.buf.Len() >= w.opts.MaxFileBytes {
		if err := w.finishFile(); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

func (w *FileWriter) fail(err error) error {
	w.err = err
	return err
}

// stageRows moves the pending rows to the writer's stage (a local
// temporary file), freeing their memory without encoding a row group.
func (w *FileWriter) stageRows() error {
	if w.closed || w.err != nil || w.rows.rows == 0 {
		return w.err
	}
	if w.stage == nil {
		w.stage = &stage{}
	}
	if err := w.stage.add(w.rows, len(w.cols)); err != nil {
		return w.fail(err)
	}
	if w.rows.heldBytes() > 2*w.rows.rawSize {
		w.rows.drop() // a buffer too large for its rows: not handed to another writer
	} else {
		w.rows.release()
	}
	return nil
}

// flushRowGroup encodes the staged rows, then the pending ones, into the
// open file: one row group, or several of restoreRowGroupBytes when rows
// were staged.
func (w *FileWriter) flushRowGroup() error {
	if w.stage != nil {
		return w.restoreStaged()
	}
	return w.encodePending()
}

// stageFull reports whether staged and pending rows together make a row
// group: encoding them then, not at Close, keeps encoding alongside reading.
func (w *FileWriter) stageFull() bool {
	return w.stage != nil && (w.stage.rows+w.rows.rows >= w.opts.RowGroupRows ||
		w.stage.raw+w.rows.rawSize >= min(w.opts.RowGroupBytes, restoreRowGroupBytes))
}

// restoreStaged encodes every staged row, then the pending ones, in order.
// The pending rows, the newest, stay in memory: staging them behind the
// others only to read them back cost a write and a read of every pending
// byte (8% of a drain's CPU whose batches passed the budget).
func (w *FileWriter) restoreStaged() error {
	st := w.stage
	w.stage = nil
	defer st.close()
	tail := w.rows
	w.rows = &pendingRows{lastCap: tail.lastCap}
	if err := w.restoreChunks(st); err != nil {
		tail.release()
		return err
	}
	switch {
	case tail.rows == 0:
	case w.rows.rows == 0:
		w.rows = tail
	default:
		w.rows.appendRows(tail, len(w.cols))
		tail.release()
	}
	return w.encodePending()
}

// restoreChunks restores the staged rows in row groups of a bounded size,
// leaving the last, smaller one pending.
func (w *FileWriter) restoreChunks(st *stage) error {
	for _, ch := range st.chunks {
		if err := st.restore(ch, w.rows, len(w.cols)); err != nil {
			return err
		}
		if w.rows.rows >= w.opts.RowGroupRows || w.rows.rawSize >= min(w.opts.RowGroupBytes, restoreRowGroupBytes) {
			if err := w.encodePending(); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodePending encodes the pending rows as one row group of the open file.
func (w *FileWriter) encodePending() error {
	if w.rows.rows == 0 {
		return nil
	}
	if w.cur.pf == nil {
		w.cur.pf = parquetpage.NewFile(w.enc, w.cur.buf)
	}
	n := w.rows.rows
	if err := w.rows.encode(w.cur.pf, len(w.cols)); err != nil {
		return fmt.Errorf("write row group of %d rows to %s: %w", n, w.cur.name, err)
	}
	return nil
}

// finishFile writes the footer of the open file and queues it for upload.
func (w *FileWriter) finishFile() error {
	if w.cur == nil {
		return nil
	}
	f := w.cur
	w.cur = nil
	w.done = append(w.done, f)
	if f.pf == nil {
		return nil
	}
	if err := f.pf.Close(); err != nil {
		return fmt.Errorf("close parquet file %s: %w", f.name, err)
	}
	return nil
}

// Close finishes the last file, uploads every file to the store and returns
// their add actions in row order. A writer with no rows returns no adds.
// On error nothing is returned and the files already uploaded, and the one
// whose upload failed, are deleted (best effort; a leftover is an
// unreferenced orphan that no Delta reader reads).
func (w *FileWriter) Close(ctx context.Context) ([]delta.Add, error) {
	if w.closed {
		return nil, errors.New("topic file writer already closed")
	}
	defer w.Abort()
	if w.err == nil {
		if err := w.flushRowGroup(); err != nil {
			w.err = err
		} else if err := w.finishFile(); err != nil {
			w.err = err
		}
	}
	if w.err != nil {
		return nil, fmt.Errorf("finish data files: %w", w.err)
	}
	adds := make([]delta.Add, 0, len(w.done))
	for _, f := range w.done {
		add, err := w.upload(ctx, f)
		if err != nil {
			// A failed Put may still have landed (ambiguous outcome).
			w.deleteUploaded(append(adds, delta.Add{Path: f.name}))
			return nil, err
		}
		adds = append(adds, add)
	}
	return adds, nil
}

func (w *FileWriter) upload(ctx context.Context, f *dataFile) (delta.Add, error) {
	if err := ctx.Err(); err != nil {
		return delta.Add{}, fmt.Errorf("upload %s: %w", f.name, err)
	}
	size := f.buf.Len()
	if err := f.buf.upload(ctx); err != nil {
		return delta.Add{}, fmt.Errorf("upload %s (%d bytes) to %s: %w", f.name, size, w.store, err)
	}
	f.buf.Discard()
	return delta.Add{
		Path:             f.name,
		PartitionValues:  map[string]*string{},
		Size:             size,
		ModificationTime: time.Now().UnixMilli(),
		DataChange:       true,
		Stats:            string(f.stats.appendJSON(make([]byte, 0, 512), w.cols)),
	}, nil
}

func (w *FileWriter) deleteUploaded(adds []delta.Add) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range adds {
		_ = w.store.Delete(ctx, a.Path)
	}
}

// Abort discards every pending row and file (temporary files included)
// without uploading anything. It is safe to call at any time, also after
// Close; the writer cannot be used afterwards.
func (w *FileWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.cur != nil {
		w.done = append(w.done, w.cur)
		w.cur = nil
	}
	for _, f := range w.done {
		f.buf.Discard()
	}
	w.done = nil
	w.rows.release()
	if w.stage != nil {
		w.stage.close()
		w.stage = nil
	}
}
