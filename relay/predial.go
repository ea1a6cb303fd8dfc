package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/pgsource"
)

// predialMaxAge is how long a replication connection dialled ahead may
// wait for the preflight (a standby may wait for the slot for hours): an
// older one is closed and dialled again, so START_REPLICATION never goes
// out on a connection a firewall may have forgotten.
const predialMaxAge = 10 * time.Second

// predial is the session's replication connection, dialled while the
// preflight checks the source and the store on the SQL connection: the two
// connections' start-ups (a backend process each, two with sslmode=prefer
// when the server refuses TLS) overlap instead of adding up. Until
// START_REPLICATION the connection is an idle walsender that holds nothing:
// not the slot, not a snapshot.
type predial struct {
	dsn  string
	done chan struct{}
	// conn, err and at are written by the dial before done closes.
	conn *pgconn.PgConn
	err  error
	at   time.Time
	used bool // take or discard was called (the session's goroutine only)
}

// dialReplication starts dialling dsn's replication connection, bounded by
// ctx and pgsource.QueryTimeout.
func dialReplication(ctx context.Context, dsn string) *predial {
	p := &predial{dsn: dsn, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		dctx, cancel := context.WithTimeout(ctx, pgsource.QueryTimeout)
		defer cancel()
		p.conn, p.err = pgsource.ConnectReplication(dctx, dsn)
		p.at = time.Now()
	}()
	return p
}

// take returns a replication connection the caller owns: the dialled one,
// waiting for its dial, or a new one when the dialled one is older than
// predialMaxAge, its dial failed (the failure may have been a moment's:
// the new dial's error is the one returned) or discard was called.
func (p *predial) take(ctx context.Context) (*pgconn.PgConn, error) {
	if p.used {
		return pgsource.ConnectReplication(ctx, p.dsn)
	}
	p.used = true
	select {
	case <-p.done:
	case <-ctx.Done():
		p.closeLater()
		return nil, ctx.Err()
	}
	if p.err == nil && time.Since(p.at) <= predialMaxAge {
		return p.conn, nil
	}
	if p.conn != nil {
		closeWithin(ctx, p.conn.Close)
	}
	return pgsource.ConnectReplication(ctx, p.dsn)
}

// discard closes the dialled connection unless take returned it: once its
// dial ends, without waiting for it. A first start discards it before its
// bootstrap opens a replication connection of its own, so that the relay
// never holds two walsenders (max_wal_senders may be small).
func (p *predial) discard() {
	if p.used {
		return
	}
	p.used = true
	p.closeLater()
}

func (p *predial) closeLater() {
	go func() {
		<-p.done
		if p.conn != nil {
			closeWithin(context.Background(), p.conn.Close)
		}
	}()
}
