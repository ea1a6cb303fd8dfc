package pgsource

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A walsender sends each message as soon as it is decoded: one send(2),
// one TCP segment, per message. Go's poller registers a socket once,
// edge-triggered, so each segment that arrives wakes the poller, whether
// or not the relay is waiting to read: in a drain, the scheduler's wake-ups
// cost more CPU than decoding, routing and encoding together, on the cores
// the database needs. gatherConn reads in batches instead. While data
// flows (the last read found little), it raises the socket's low-water
// mark (SO_RCVLOWAT), so the kernel wakes the poller only once
// its low-water mark has arrived, and bounds that wait to gatherWait; then it
// reads whatever is there. When the stream goes idle it returns to the
// socket's defaults, so an idle relay sleeps without timers.
//
// A connection's reads gather by its gather parameters. The replication
// stream is messages of tens to hundreds of bytes (streamGather); a COPY
// arrives in the server's 8 KiB flushes (bulkGather).
type gather struct {
	// below: a read of fewer bytes found the socket nearly empty, so the
	// next read gathers.
	below int
	// lowat is the low-water mark while gathering.
	lowat int
	// buffer is what one read asks of the socket (gatheringFrontend).
	buffer int
}

var (
	// streamGather: pgx reads into buffers of 8 KiB or more, so a read
	// under 4 KiB found the socket nearly empty. 32 KiB is about half a
	// millisecond of a drain's stream. Each read and each wake-up also
	// costs the kernel a TCP window update: fewer, larger reads cost the
	// relay 14% less CPU per event in 1,000-row transactions than 8 KiB
	// reads (side by side, two rounds). 128 KiB slowed single-row drains:
	// the walsender then waits on its full socket. pgx's own reader asks
	// for at most 8 KiB, so the connection reads through 64 KiB.
	streamGather = gather{below: 4 << 10, lowat: 32 << 10, buffer: 64 << 10}
	// bulkGather: a COPY's server flushes 8 KiB at a time, and a reader
	// that keeps up reads each flush on its own wake-up (socket reads and
	// the poller's wake-ups were a third of a bootstrap's CPU): it reads
	// 64 KiB at least, a fraction of a millisecond of a COPY.
	bulkGather = gather{below: 64 << 10, lowat: 64 << 10, buffer: 256 << 10}
)

// gatherWait bounds a gathering read: what arrived by then is read. Go's
// timers fire about a millisecond late at the least on Linux; a
// millisecond on a message costs nothing against a batch delay of tens of
// milliseconds, nor at the end of a COPY.
const gatherWait = time.Millisecond

// gatherConn is a net.Conn whose reads gather (see above). Deadlines set
// by the caller keep their meaning: a read returns when the caller's
// deadline passes, and a deadline set from another goroutine interrupts a
// read at once.
type gatherConn struct {
	net.Conn
	raw syscall.RawConn // nil: not a socket; reads do not gather
	g   gather

	mu       sync.Mutex
	deadline time.Time // the caller's read deadline
	applied  time.Time // the read deadline set on the socket
	short    bool      // the last read returned less than g.below
	lowat    bool      // SO_RCVLOWAT is raised
}

func newGatherConn(c net.Conn, params gather) *gatherConn {
	g := &gatherConn{Conn: c, g: params}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			g.raw = raw
		}
	}
	return g
}

// NetConn returns the connection gatherConn wraps.
func (c *gatherConn) NetConn() net.Conn { return c.Conn }

func (c *gatherConn) Read(p []byte) (int, error) {
	if c.gathering(p) {
		n, err := c.Conn.Read(p)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || c.callerExpired() {
			c.done(n)
			return n, err
		}
		// The gathering wait ended: read what is there the ordinary way.
	}
	if err := c.plain(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.done(n)
	return n, err
}

// gathering prepares a gathering read when the last read was short and
// reports whether it did: the low-water mark raised and the read deadline
// at most gatherWait away.
func (c *gatherConn) gathering(p []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.short || c.raw == nil || len(p) < c.g.lowat {
		return false
	}
	wait := time.Now().Add(gatherWait)
	if !c.deadline.IsZero() && !c.deadline.After(wait) {
		return false // the caller's deadline comes first
	}
	if !c.lowat {
		if c.setLowat(c.g.lowat) != nil {
			return false
		}
		c.lowat = true
	}
	return c.setDeadline(wait) == nil
}

// setDeadline sets the socket's read deadline unless it is set already
// (each change resets a runtime timer).
func (c *gatherConn) setDeadline(t time.Time) error {
	if t.Equal(c.applied) {
		return nil
	}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.applied = t
	return nil
}

// plain restores the caller's deadline and the default low-water mark.
func (c *gatherConn) plain() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lowat {
		if err := c.setLowat(1); err != nil {
			return err
		}
		c.lowat = false
	}
	return c.setDeadline(c.deadline)
}

func (c *gatherConn) done(n int) {
	c.mu.Lock()
	c.short = n < c.g.below
	c.mu.Unlock()
}

func (c *gatherConn) callerExpired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.deadline.IsZero() && !time.Now().Before(c.deadline)
}

func (c *gatherConn) setLowat(n int) error {
	var serr error
	err := c.raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	})
	if err != nil {
		return err
	}
	return serr
}

// SetReadDeadline records the caller's deadline and applies it at once,
// with the default low-water mark: a read in progress, gathering or not,
// then ends by the caller's deadline or on any data, as a plain read does.
func (c *gatherConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setCallerDeadline(t, c.Conn.SetReadDeadline)
}

func (c *gatherConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setCallerDeadline(t, c.Conn.SetDeadline)
}

func (c *gatherConn) setCallerDeadline(t time.Time, set func(time.Time) error) error {
	c.deadline = t
	if c.lowat {
		if err := c.setLowat(1); err != nil {
			return err
		}
		c.lowat = false
	}
	if err := set(t); err != nil {
		return err
	}
	c.applied = t
	return nil
}

// gatheringFrontend returns pgx's frontend reading through a buffer of
// g.buffer bytes, so that a gathering read takes all that has gathered.
func gatheringFrontend(g gather) pgconn.BuildFrontendFunc {
	return func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, g.buffer), w)
	}
}

// dialGathering wraps a dial function so that its connections read in
// batches (gatherConn). TLS, when configured, runs on top of it.
func dialGathering(dial pgconn.DialFunc, g gather) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newGatherConn(c, g), nil
	}
}

// GatherBulk makes a connection's reads gather as a COPY's should: at
// least 64 KiB at a time (or what arrived within a millisecond), through a
// 256 KiB buffer.
func GatherBulk(cfg *pgconn.Config) {
	cfg.DialFunc = dialGathering(cfg.DialFunc, bulkGather)
	cfg.BuildFrontend = gatheringFrontend(bulkGather)
}
