package bootstrap

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/decoding"
)

// fanOutChunk is how many bytes of whole tuples a worker gets at a time
// (a variable for tests).
var fanOutChunk = 256 << 10

// fanOut splits one COPY ... (FORMAT binary) stream between the workers of
// a unit, so one connection's rows are encoded on several cores: it cuts
// the stream into chunks of whole tuples, one being filled per worker, and
// sends each to its worker when full. Without a route (or while the route
// spreads), chunks are dealt in turn; with one, each topic's rows go to
// the worker of the topic (topicRoute). Each worker writes its own files,
// so rows stay in scan order within every file. Memory: a few chunks per
// worker.
type fanOut struct {
	ctx      context.Context
	cut      *binRows // finds tuple boundaries and checks the stream's framing
	topicCol int      // the column route reads, if route is set
	route    *topicRoute
	chunks   [][]byte // the chunk being filled for each worker
	outs     []chan []byte
	next     int // the worker of rows dealt in turn
	free     chan []byte
}

// newFanOut deals chunks in turn when topicCol < 0, and otherwise routes
// rows by the value of column topicCol.
func newFanOut(ctx context.Context, ncols, workers, topicCol int) *fanOut {
	f := &fanOut{ctx: ctx, free: make(chan []byte, 4*workers), topicCol: topicCol}
	f.cut = newBinRows(ncols, nil)
	f.cut.tuple = f.add
	if topicCol >= 0 && workers > 1 {
		f.route = newTopicRoute(workers)
	}
	for range workers {
		f.outs = append(f.outs, make(chan []byte, 2))
		f.chunks = append(f.chunks, f.buffer())
	}
	return f
}

// Write is pgconn's sink for the COPY output.
func (f *fanOut) Write(p []byte) (int, error) { return f.cut.Write(p) }

func (f *fanOut) add(tuple []byte) error {
	k, routed := f.next, false
	if f.route != nil {
		var topic []byte // NULL: routed like the empty topic
		if d := f.cut.datums[f.topicCol]; d.Kind == decoding.DatumBinary {
			topic = d.Data
		}
		var rk int
		if rk, routed = f.route.worker(topic, len(tuple)); routed {
			k = rk
		}
	}
	f.chunks[k] = append(f.chunks[k], tuple...)
	if len(f.chunks[k]) < fanOutChunk {
		return nil
	}
	if err := f.send(k); err != nil {
		return err
	}
	if !routed {
		f.next = (f.next + 1) % len(f.outs)
	}
	return nil
}

// send sends worker k's chunk, if not empty, and starts a new one.
func (f *fanOut) send(k int) error {
	if len(f.chunks[k]) == 0 {
		return nil
	}
	select {
	case f.outs[k] <- f.chunks[k]:
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
	f.chunks[k] = f.buffer()
	return nil
}

func (f *fanOut) buffer() []byte {
	select {
	case b := <-f.free:
		return b[:0]
	default:
		return make([]byte, 0, fanOutChunk+64<<10)
	}
}

// recycle keeps a chunk buffer for reuse, unless a huge tuple grew it.
func (f *fanOut) recycle(b []byte) {
	if cap(b) > 4*fanOutChunk {
		return
	}
	select {
	case f.free <- b:
	default:
	}
}

// finish sends the last chunk and checks the stream ended properly.
func (f *fanOut) finish() error {
	for k := range f.chunks {
		if err := f.send(k); err != nil {
			return err
		}
	}
	return f.cut.finish()
}

// run copies the part through fan-out: the COPY in one goroutine, each
// worker's parser (which must take tuples without the stream header) in
// its own. The first error stops them all.
func (f *fanOut) run(copyTo func(ctx context.Context, sink *fanOut) error, parsers []*binRows) error {
	g, ctx := errgroup.WithContext(f.ctx)
	f.ctx = ctx
	for k, p := range parsers {
		in := f.outs[k]
		g.Go(func() error {
			for chunk := range in {
				if _, err := p.Write(chunk); err != nil {
					return err
				}
				f.recycle(chunk)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer func() {
			for _, c := range f.outs {
				close(c)
			}
		}()
		if err := copyTo(ctx, f); err != nil {
			return err
		}
		return f.finish()
	})
	return g.Wait()
}
