package bench

import (
	"context"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// hogCore spins one goroutine, locked to its OS thread, until the returned
// function is called: a neighbour that takes one core of the machine, so
// the relay and its reference are measured under the same load.
func hogCore() (stop func()) {
	var done atomic.Bool
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(exited)
		x := uint64(1)
		for !done.Load() {
			for range 1 << 16 {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		_ = x
	}()
	return func() { done.Store(true); <-exited }
}

// watchWalsender is walsenderCPU, or nothing when the bench is unwatched.
func (b *bench) watchWalsender(ctx context.Context, dsn, slot string) (stop func() float64) {
	if b.unwatched {
		return func() float64 { return 0 }
	}
	return walsenderCPU(ctx, dsn, slot)
}

// walsenderCPU follows the CPU time of the walsender serving slot (the
// server's share of a drain: logical decoding) until the returned function
// is called, which returns the last reading in seconds. The walsender
// exits with its client, so it is sampled every 10 ms.
func walsenderCPU(ctx context.Context, dsn, slot string) (stop func() float64) {
	ctx, cancel := context.WithCancel(ctx)
	var last atomic.Uint64 // math.Float64bits
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		var pid int
		for tick := time.NewTicker(10 * time.Millisecond); ; {
			if pid == 0 {
				var p *int
				_ = conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&p)
				if p != nil {
					pid = *p
				}
			}
			if pid != 0 {
				if c := cpuSeconds(pid); c > math.Float64frombits(last.Load()) {
					last.Store(math.Float64bits(c))
				}
			}
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 {
		cancel()
		<-done
		return math.Float64frombits(last.Load())
	}
}
