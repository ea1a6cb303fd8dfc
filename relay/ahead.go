package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgsource"
)

// Ahead is a session's two connections, dialled side by side: the
// replication connection (predial) and the SQL connection its preflight
// runs on. A caller that still has work to do before Run (opening the
// store, reading the contracts personal data needs: one LIST on S3) starts
// them with DialAhead and sets Relay.Ahead, so that the first session finds
// them dialled; every other session dials its own the same way.
type Ahead struct {
	repl  *predial
	sql   *pending[*pgx.Conn]
	begun time.Time
}

// DialAhead starts dialling dsn's replication and SQL connections, both
// bounded as a session's are (pgsource.QueryTimeout). Set it as
// Relay.Ahead before Run, or Discard it.
func DialAhead(ctx context.Context, dsn string) *Ahead {
	return &Ahead{
		repl:  dialReplication(ctx, dsn),
		sql:   async(func() (*pgx.Conn, error) { return pgsource.ConnectBounded(ctx, dsn, pgsource.QueryTimeout) }),
		begun: time.Now(),
	}
}

// Discard closes both connections once their dials end, without waiting.
// A nil Ahead is a no-op.
func (a *Ahead) Discard() {
	if a == nil {
		return
	}
	a.repl.discard()
	go func() {
		if c, err := a.sql.wait(); err == nil {
			closeWithin(context.Background(), c.Close)
		}
	}()
}

// sessionConns returns the session's replication connection, maybe still
// being dialled, and its SQL connection: Relay.Ahead's for the first
// session, unless they were begun more than predialMaxAge ago or the SQL
// dial failed (the failure may have been a moment's, before the database
// was there: the new dial's error is the one returned); new ones
// otherwise.
func (r *Relay) sessionConns(ctx context.Context) (*predial, *pgx.Conn, error) {
	a := r.Ahead
	r.Ahead = nil
	if a != nil && time.Since(a.begun) > predialMaxAge {
		a.Discard()
		a = nil
	}
	if a != nil {
		if sql, err := a.sql.wait(); err == nil {
			return a.repl, sql, nil
		}
		a.repl.discard()
	}
	a = DialAhead(ctx, r.cfg.Source)
	sql, err := a.sql.wait()
	if err != nil {
		a.repl.discard()
		return nil, nil, err
	}
	return a.repl, sql, nil
}
