package pgsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// AnswerTimeoutError is the error of a bounded connection's read that
// waited longer than its bound for the server (ConnectBounded).
type AnswerTimeoutError struct{ Within time.Duration }

func (e *AnswerTimeoutError) Error() string {
	return fmt.Sprintf("PostgreSQL did not answer within %s: the server is frozen or the connection is gone", e.Within)
}

// Timeout reports true: a caller sees a timeout, as net.Error timeouts.
func (e *AnswerTimeoutError) Timeout() bool   { return true }
func (e *AnswerTimeoutError) Temporary() bool { return false }

// answerConn bounds every read its caller leaves without a deadline to
// within; a deadline the caller sets (pgconn does, to interrupt a read
// when a context ends) takes precedence. pgx reads only while it waits
// for an answer, so an idle connection never times out.
type answerConn struct {
	net.Conn
	within time.Duration

	mu       sync.Mutex
	deadline time.Time // the caller's read deadline
}

func (c *answerConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	own := c.deadline.IsZero()
	if own {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.within)); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if err != nil && own && errors.Is(err, os.ErrDeadlineExceeded) {
		c.mu.Lock()
		still := c.deadline.IsZero() // not a deadline the caller set meanwhile
		c.mu.Unlock()
		if still {
			return n, &net.OpError{Op: "read", Net: "tcp", Addr: c.RemoteAddr(), Err: &AnswerTimeoutError{Within: c.within}}
		}
	}
	return n, err
}

// NetConn returns the connection answerConn wraps.
func (c *answerConn) NetConn() net.Conn { return c.Conn }

func (c *answerConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

func (c *answerConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

// dialAnswering wraps a dial function so that its connections' reads wait
// at most within for the server (answerConn).
func dialAnswering(dial pgconn.DialFunc, within time.Duration) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &answerConn{Conn: c, within: within}, nil
	}
}
