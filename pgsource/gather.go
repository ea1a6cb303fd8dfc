package pgsource

import (
	"context"
	"net"
	"time"
)

// A walsender sends each message as soon as it is decoded: one send(2)
// per message. A reader that keeps up therefore reads one message per
// read(2), and each read that finds the socket empty parks the reading
// goroutine and wakes it through the poller: in a drain of single-row
// transactions, that cost as much CPU as decoding, routing and encoding
// together, on the cores the database needs. gatherConn reads in batches
// instead: after a read that returned little, it waits a moment before the
// next, so that read finds the messages sent meanwhile.
const (
	// gatherBelow is a "little" read: less than this many bytes means the
	// socket was nearly empty. pgx reads into buffers of 8 KiB or more.
	gatherBelow = 4 << 10
	// gatherPause is the wait. Go's timers sleep at least about a
	// millisecond on Linux whatever is asked; one millisecond more on a
	// message costs nothing against a batch delay of tens of milliseconds.
	gatherPause = time.Millisecond
)

// gatherConn is a net.Conn whose reads wait gatherPause after a read of
// less than gatherBelow bytes. A reader that falls behind reads full
// buffers and never waits, so throughput is unchanged; deadlines and
// writes pass through.
type gatherConn struct {
	net.Conn
	short bool
}

func (c *gatherConn) Read(p []byte) (int, error) {
	if c.short && len(p) >= gatherBelow {
		time.Sleep(gatherPause)
	}
	n, err := c.Conn.Read(p)
	c.short = n < gatherBelow
	return n, err
}

// dialGathering wraps a dial function so that its connections read in
// batches (gatherConn). TLS, when configured, runs on top of it.
func dialGathering(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatherConn{Conn: c}, nil
	}
}
