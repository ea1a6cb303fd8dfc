package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
)

// resolver publishes the source's resolved position (catalog.Resolved):
// the position the session acknowledges, capped by its holds, every
// event below which is in its topic and every transaction below which is
// recorded (txrecords.go). The session notes each acknowledgement; a
// goroutine of its own writes the newest one at most every
// Config.ResolvedInterval, off the receive loop, and once more when the
// session ends. catalog.WriteResolved never moves it back.
type resolver struct {
	r      *Relay
	want   atomic.Uint64
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	wrote  uint64
	failed bool // the last write failed (logged once until one succeeds)
}

// newResolver returns nil when transaction records are off: note and
// close of a nil resolver do nothing.
func newResolver(r *Relay) *resolver {
	if !r.cfg.TransactionRecords || r.store == nil {
		return nil
	}
	return &resolver{r: r, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// note records the position the session acknowledged.
func (v *resolver) note(lsn pglogrepl.LSN) {
	if v == nil || uint64(lsn) <= v.want.Load() {
		return
	}
	v.want.Store(uint64(lsn))
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

func (v *resolver) run(ctx context.Context) {
	if v == nil {
		return
	}
	defer close(v.done)
	every := v.r.cfg.ResolvedInterval
	if every <= 0 {
		every = time.Second
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.stop:
			v.write(ctx)
			return
		case <-v.kick:
		}
		v.write(ctx)
		select {
		case <-ctx.Done():
			return
		case <-v.stop:
			v.write(ctx)
			return
		case <-time.After(every):
		}
	}
}

// write publishes the newest noted position if it moved.
func (v *resolver) write(ctx context.Context) {
	lsn := v.want.Load()
	if lsn <= v.wrote || v.r.id.AppID == "" {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := catalog.WriteResolved(wctx, v.r.store, catalog.Resolved{Source: v.r.id.AppID, LSN: int64(lsn),
		Position: v.r.positions.Pos(pglogrepl.LSN(lsn)), UpdatedAt: time.Now().UTC()})
	if err != nil {
		if !v.failed {
			v.r.log.Warn("could not publish the resolved position; retrying at the next acknowledgement", "lsn", pglogrepl.LSN(lsn), "error", err)
		}
		v.failed = true
		return
	}
	v.failed, v.wrote = false, lsn
}

// close writes the last noted position and stops the goroutine.
func (v *resolver) close() {
	if v == nil {
		return
	}
	v.once.Do(func() { close(v.stop) })
	<-v.done
}
