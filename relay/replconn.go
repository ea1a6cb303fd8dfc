package relay

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// replicationConn is the replication connection as a session uses it; the
// pipeline's unit tests give the session a scripted one.
type replicationConn interface {
	// Receive returns the next message, or (nil, nil) when none arrived
	// by until. It returns at once when ctx ends.
	Receive(ctx context.Context, until time.Time) (pgproto3.BackendMessage, error)
	// SendStatus sends a standby status update; reply asks the server
	// to answer at once (with a keepalive).
	SendStatus(ctx context.Context, write, flush pglogrepl.LSN, reply bool) error
	// Wake makes the Receive in progress, or else the next one, return
	// (nil, nil) at once: a graceful stop does not wait for the wake-up.
	// It may be called from any goroutine.
	Wake()
	Close(ctx context.Context) error
}

// pgReplication is a replicationConn over a real connection. It waits with
// the socket's read deadline rather than a context per message (a timer
// and a context watch per message cost more than decoding one): the
// deadline moves only when the wake-up time does, and ctx ending sets it
// in the past, as pgconn's own cancellation does.
type pgReplication struct {
	*pgconn.PgConn
	until   time.Time       // the read deadline set on the socket
	watched context.Context // the context whose end interrupts a read
	unwatch func() bool
	woken   atomic.Bool // Wake was called: the next Receive returns at once
}

func (c *pgReplication) Wake() {
	c.woken.Store(true)
	c.interrupt()
}

// interrupt ends a read in progress: a deadline in the past, as pgconn's
// own cancellation sets.
func (c *pgReplication) interrupt() { _ = c.Conn().SetReadDeadline(time.Unix(1, 0)) }

// wasWoken reports a Wake since the last call; the next Receive then sets
// its deadline again (Wake moved it).
func (c *pgReplication) wasWoken() bool {
	if !c.woken.Swap(false) {
		return false
	}
	c.until = time.Time{}
	return true
}

func (c *pgReplication) Receive(ctx context.Context, until time.Time) (pgproto3.BackendMessage, error) {
	if ctx != c.watched {
		if c.unwatch != nil {
			c.unwatch()
		}
		c.watched = ctx
		c.unwatch = context.AfterFunc(ctx, c.interrupt)
	}
	if !until.Equal(c.until) {
		if err := c.Conn().SetReadDeadline(until); err != nil {
			return nil, err
		}
		c.until = until
	}
	// Checked after the deadline moved: a cancellation or a Wake is never
	// overwritten.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.wasWoken() {
		return nil, nil
	}
	msg, err := c.ReceiveMessage(context.Background())
	switch {
	case err == nil:
		return msg, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case pgconn.Timeout(err):
		c.wasWoken()
		return nil, nil // the wake-up deadline, or a Wake: nothing arrived
	}
	return nil, err
}

// streamEnder is a replicationConn that can end the stream as the
// protocol does.
type streamEnder interface {
	EndStream(ctx context.Context) error
}

// endStreamTimeout bounds the wait for the server's answer to CopyDone.
const endStreamTimeout = 10 * time.Second

// EndStream ends the replication stream as pg_recvlogical --endpos does:
// CopyDone, then the server's answer, discarding what it still sent. The
// server has then applied every status update sent before, so the slot
// confirms what the relay acknowledged when Run returns (closing the
// socket instead left the walsender to read the last update after the
// process had exited: a --stop-at run was seen with its slot 100 ms
// behind).
func (c *pgReplication) EndStream(ctx context.Context) error {
	deadline := time.Now().Add(endStreamTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.Conn().SetDeadline(deadline); err != nil {
		return fmt.Errorf("end the replication stream: %w", err)
	}
	c.until = deadline
	if _, err := pglogrepl.SendStandbyCopyDone(ctx, c.PgConn); err != nil {
		return fmt.Errorf("end the replication stream (the server's answer to CopyDone): %w", err)
	}
	return nil
}

func (c *pgReplication) Close(ctx context.Context) error {
	if c.unwatch != nil {
		c.unwatch()
	}
	return c.PgConn.Close(ctx)
}

func (c *pgReplication) SendStatus(ctx context.Context, write, flush pglogrepl.LSN, reply bool) error {
	return pglogrepl.SendStandbyStatusUpdate(ctx, c.PgConn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write, WALFlushPosition: flush, WALApplyPosition: flush, ClientTime: time.Now(), ReplyRequested: reply,
	})
}
