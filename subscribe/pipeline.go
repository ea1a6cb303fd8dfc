package subscribe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// The read pipeline of one round: a producer reads the commits in version
// order and queues their data files; decoders (decodeWorkers) read files
// ahead, each into a small channel of event chunks; the subscription
// drains the files strictly in queue order. Memory is bounded whatever
// the size of a version: each decoder holds one data file, and at most
// orderQueue files queued after the one being delivered hold decoded
// chunks, at most chunkQueue chunks of chunkEvents events each. The queue
// lets the decoders run a few files ahead, so a pause of the subscription
// (its handler, the garbage collector) does not leave them idle. Chunks
// hold the events by column (see chunk) and go back to the decoders once
// delivered; each decoder keeps its page readers' buffers from file to
// file (chunkDecoder).
const (
	decodeWorkers = 2
	chunkEvents   = 1024
	chunkQueue    = 16
	orderQueue    = 4 * decodeWorkers
)

// item is one step of the pipeline, delivered in order: a data file of
// version v, the end of version v, or an error.
type item struct {
	v    int64
	vt   time.Time
	add  *delta.Add
	base int64 // index of the file's first row in its version; -1 unknown
	end  bool
	out  chan *chunk // decoded chunks; closed after err is set
	err  error
}

// deliverRound delivers the versions the listing shows from the position.
func (s *subscription) deliverRound(ctx context.Context, view *LogView) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	order, work := make(chan *item, orderQueue), make(chan *item)
	start := s.pos
	wg.Add(1 + decodeWorkers)
	go func() { defer wg.Done(); s.produce(ctx, view, start, order, work) }()
	reuse := s.decodeReuse()
	chunks := reuse[0].chunks
	for w := range decodeWorkers {
		go func() {
			defer wg.Done()
			reuse := reuse[w]
			for it := range work {
				s.decode(ctx, it, reuse)
			}
		}()
	}
	var idx int64
	for it := range order {
		switch {
		case it.end:
			s.pos = Position{Version: it.v + 1}
			obj := view.Commits[it.v]
			s.guard, idx = &obj, 0
			continue
		case it.add == nil:
			return it.err
		case it.base >= 0:
			idx = it.base
		}
		for c := range it.out {
			k := 0 // events before the start were handled
			if it.v == start.Version && idx < start.Offset {
				k = int(min(start.Offset-idx, int64(c.n)))
			}
			if err := s.deliverChunk(ctx, c, k, Position{Version: it.v, Offset: idx + int64(k)}, it.vt); err != nil {
				return err
			}
			idx += int64(c.n)
			if err := s.release(ctx, c, chunks); err != nil {
				return err
			}
		}
		if errors.Is(it.err, storage.ErrNotFound) {
			return s.vacuumed(ctx, it.v, it.add.Path, view, it.err)
		}
		if it.err != nil {
			return it.err
		}
	}
	return ctx.Err()
}

// decodeReuse returns what the decode workers recycle, kept from round to
// round while there is something to read.
func (s *subscription) decodeReuse() []*decodeReuse {
	if s.reuse == nil {
		chunks := make(chan *chunk, decodeWorkers*chunkQueue)
		for range decodeWorkers {
			s.reuse = append(s.reuse, &decodeReuse{chunks: chunks})
		}
	}
	return s.reuse
}

// produce queues the data files of the listed versions from start, in
// order, each followed by the version's end.
func (s *subscription) produce(ctx context.Context, view *LogView, start Position, order, work chan<- *item) {
	defer close(order)
	defer close(work)
	send := func(it *item, to chan<- *item) bool {
		select {
		case to <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for v := start.Version; ; v++ {
		obj, ok := view.Commits[v]
		if !ok {
			return
		}
		items, err := s.versionItems(ctx, v, obj, start)
		if err != nil {
			send(&item{v: v, err: err}, order)
			return
		}
		for _, it := range items {
			if !send(it, order) || (it.add != nil && !send(it, work)) {
				return
			}
		}
	}
}

// versionItems reads the commit of version v and returns its files to
// read (skipping, by their stats, files the group handled before) and the
// version's end.
func (s *subscription) versionItems(ctx context.Context, v int64, obj storage.Object, start Position) ([]*item, error) {
	acts, err := readCommit(ctx, s.tbl, v)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, s.vanished(ctx, start.Version, v)
	}
	if err != nil {
		return nil, err
	}
	adds, err := s.dataAdds(v, acts)
	if err != nil {
		return nil, err
	}
	vt := commitTimestamp(acts, obj.ModTime)
	skip := int64(0)
	if v == start.Version {
		skip = start.Offset
	}
	var items []*item
	known := int64(0) // the topic's rows of the version before the next file, -1 once unknown
	for i := range adds {
		may, n, hasN := s.fileRows(adds[i].Stats)
		if !may {
			continue // other topics' rows only: never read
		}
		if known >= 0 && hasN && known+n <= skip {
			known += n // handled before: not even read
			continue
		}
		if adds[i].Size > s.o.MaxFileBytes {
			return nil, fmt.Errorf("topic %q version %d: data file %s is %d bytes, over the limit of %d (Options.MaxFileBytes)",
				s.topic, v, adds[i].Path, adds[i].Size, s.o.MaxFileBytes)
		}
		items = append(items, &item{v: v, vt: vt, add: &adds[i], base: known, out: make(chan *chunk, chunkQueue)})
		if known >= 0 && hasN {
			known += n
		} else {
			known = -1
		}
	}
	return append(items, &item{v: v, end: true}), nil
}

// decode reads the file of it into chunks.
func (s *subscription) decode(ctx context.Context, it *item, reuse *decodeReuse) {
	defer close(it.out)
	send := func(c *chunk) error {
		if s.place.Shared() {
			if c.keepTopic(s.topic); c.n == 0 {
				recycle(c, reuse.chunks)
				return nil
			}
		}
		select {
		case it.out <- c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	key, err := dataKey(it.add.Path)
	if err != nil {
		it.err = fmt.Errorf("topic %q version %d: %w", s.topic, it.v, err)
		return
	}
	data, err := s.readData(ctx, key, reuse)
	if err != nil {
		it.err = fmt.Errorf("read data file %s of version %d: %w", key, it.v, err)
		return
	}
	it.err = decodeEvents(ctx, data, reuse, send)
	if !errors.Is(it.err, errLayout) {
		if it.err != nil {
			it.err = fmt.Errorf("read data file %s of version %d: %w", key, it.v, it.err)
		}
		return
	}
	data = nil // another writer's layout: sink/topic reads it through Arrow
	c := &chunk{events: make([]outbox.Event, 0, chunkEvents)}
	it.err = topic.ReadEvents(ctx, s.tbl, *it.add, func(e outbox.Event) error {
		if c.events = append(c.events, e); len(c.events) < chunkEvents {
			return nil
		}
		c.n = len(c.events)
		err := send(c)
		c = &chunk{events: make([]outbox.Event, 0, chunkEvents)}
		return err
	})
	if c.n = len(c.events); it.err == nil && c.n > 0 {
		it.err = send(c)
	}
}

// keepFileBytes: a decode worker keeps the buffer of a data file up to
// this size for the next file.
const keepFileBytes = 32 << 20

// readData returns the bytes of the data file at key. On a store that
// reads objects in parts (local disk) they go into the worker's buffer,
// reused for its next file: the decoders copy every value out of it, and
// a file laid out otherwise is read again by sink/topic. Otherwise a Get.
func (s *subscription) readData(ctx context.Context, key string, reuse *decodeReuse) ([]byte, error) {
	obj, err := storage.OpenObject(ctx, s.tbl, key)
	if errors.Is(err, errors.ErrUnsupported) {
		return s.tbl.Get(ctx, key)
	}
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	size := obj.Size()
	if size > s.o.MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d (Options.MaxFileBytes)", size, s.o.MaxFileBytes)
	}
	buf := reuse.file
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if n, err := obj.ReadAt(buf, 0); n < len(buf) {
		return nil, fmt.Errorf("read %d of %d bytes: %w", n, size, cmp.Or(err, io.ErrUnexpectedEOF))
	}
	if size <= keepFileBytes {
		reuse.file = buf
	}
	return buf, nil
}

// dataKey turns an add path into a store key of the table: URL-decoded
// once, relative, inside the table.
func dataKey(path string) (string, error) {
	key, err := url.PathUnescape(path)
	if err != nil || key == "" || strings.Contains(key, "://") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("unsupported data file path %q", path)
	}
	return key, nil
}
