package bootstrap

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// fanOutChunk is how many bytes of whole tuples a worker gets at a time
// (a variable for tests).
var fanOutChunk = 256 << 10

// fanOut splits one COPY ... (FORMAT binary) stream between the workers of
// a unit, so one connection's rows are encoded on several cores: it cuts
// the stream into chunks of whole tuples and deals them to the workers in
// turn. Each worker writes its own files, so rows stay in scan order
// within every file. Memory: a few chunks per worker.
type fanOut struct {
	ctx   context.Context
	cut   *binRows // finds tuple boundaries and checks the stream's framing
	chunk []byte
	outs  []chan []byte
	next  int
	free  chan []byte
}

func newFanOut(ctx context.Context, ncols, workers int) *fanOut {
	f := &fanOut{ctx: ctx, free: make(chan []byte, 3*workers+1)}
	f.cut = newBinRows(ncols, nil)
	f.cut.tuple = f.add
	for range workers {
		f.outs = append(f.outs, make(chan []byte, 2))
	}
	f.chunk = f.buffer()
	return f
}

// Write is pgconn's sink for the COPY output.
func (f *fanOut) Write(p []byte) (int, error) { return f.cut.Write(p) }

func (f *fanOut) add(tuple []byte) error {
	f.chunk = append(f.chunk, tuple...)
	if len(f.chunk) >= fanOutChunk {
		return f.send()
	}
	return nil
}

func (f *fanOut) send() error {
	if len(f.chunk) == 0 {
		return nil
	}
	select {
	case f.outs[f.next] <- f.chunk:
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
	f.next = (f.next + 1) % len(f.outs)
	f.chunk = f.buffer()
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
	if err := f.send(); err != nil {
		return err
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
