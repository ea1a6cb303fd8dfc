package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Relay moves outbox events from one replication slot into Delta topic
// tables. See the package documentation for its guarantees.
type Relay struct {
	cfg      Config
	store    storage.Store
	router   *outbox.Router
	mappings outbox.Mappings
	log      *slog.Logger
	metrics  *Metrics
	// Ready is closed once the first replication session is streaming.
	ready     chan struct{}
	readyOnce bool

	// Bootstrap runs on a first start (no slot, no marker): it creates the
	// slot, copies the rows its exported snapshot sees into the topics,
	// writes the marker and returns the position to stream from.
	Bootstrap func(ctx context.Context, cfg Config, store storage.Store) (pglogrepl.LSN, error)
}

// New prepares a relay; it touches nothing until Run.
func New(cfg Config, store storage.Store, mappings outbox.Mappings, log *slog.Logger, m *Metrics) *Relay {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	return &Relay{cfg: cfg, store: store, router: outbox.NewRouter(mappings), mappings: mappings, log: log, metrics: m, ready: make(chan struct{})}
}

// Ready is closed when the relay is streaming.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Run relays until ctx is cancelled (graceful stop: the current batch is
// committed and acknowledged, then Run returns nil) or a fatal error. A
// transient failure (PostgreSQL restart, network, store hiccup) ends the
// current session; Run starts a new one from the slot's confirmed position
// with exponential backoff. A *UserError is returned at once.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return &UserError{Msg: err.Error(), Err: err}
	}
	backoff := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		started := time.Now()
		err := r.runSession(ctx)
		if err == nil || (ctx.Err() != nil && !isFatal(err)) {
			return nil
		}
		if errors.Is(err, errRewind) {
			continue
		}
		if !r.readyOnce || !retryable(err) {
			return err
		}
		if time.Since(started) > time.Minute {
			backoff = 250 * time.Millisecond
		}
		r.metrics.reconnect()
		r.log.Warn("replication session ended; restarting", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// runSession checks the source, opens the slot and streams until stop or
// error.
func (r *Relay) runSession(ctx context.Context) error {
	sctx := context.WithoutCancel(ctx) // graceful stop is driven by ctx.Done below
	sql, err := connectSQL(sctx, r.cfg.Source)
	if err != nil {
		return err
	}
	defer sql.Close(sctx)
	start, err := r.preflight(sctx, ctx, sql)
	if err != nil {
		return err
	}
	conn, err := r.startReplication(sctx, start)
	if err != nil {
		return err
	}
	defer conn.Close(sctx)

	com := newCommitter(r.store, r.cfg.AppID, start, r.log, r.metrics)
	go com.run(sctx)
	s := &session{r: r, conn: conn, dec: decoding.NewDecoder(), tables: newTables(r.store, r.cfg.AppID, delta.Options{Logger: r.log, AsyncCheckpoints: true}), com: com,
		fileOpts: topic.FileOptions{}, cur: newBatch(0), lastStatus: time.Now(), pauses: map[string]*pause{}}
	if !r.readyOnce {
		r.readyOnce = true
		close(r.ready)
	}
	r.log.Info("streaming", "slot", r.cfg.Slot, "publication", r.cfg.Publication, "from_lsn", start, "store", r.store.String())
	err = s.stream(sctx, ctx.Done())
	if err != nil {
		s.cur.abort()
		select {
		case <-com.done:
		default:
			close(com.in)
			<-com.done
		}
		return err
	}
	s.tables.waitCheckpoints()
	r.log.Info("stopped", "durable_lsn", pglogrepl.LSN(com.durable.Load()))
	return nil
}

// preflight checks wal_level, the publication and the slot, creating the
// slot on a first start. It returns the slot's confirmed position.
func (r *Relay) preflight(ctx, stopCtx context.Context, sql *pgx.Conn) (pglogrepl.LSN, error) {
	if err := CheckWALLevel(ctx, sql); err != nil {
		return 0, err
	}
	if err := migrations.Check(ctx, sql, migrations.Options{Publication: r.cfg.Publication, Mappings: r.mappings}); err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) {
			return 0, err
		}
		return 0, userErr(err, "%s", err.Error())
	}
	if _, err := r.store.List(ctx, registryPrefix, ""); err != nil {
		return 0, userErr(err, "cannot read store %s: %s; check DELTABUS_STORE and credentials", r.store, rootCause(err))
	}
	slot, err := ReadSlot(ctx, sql, r.cfg.Slot)
	if err != nil {
		return 0, err
	}
	if !slot.Exists {
		return r.firstStart(stopCtx, sql) // SIGTERM may stop a bootstrap: it is safe to redo
	}
	if _, found, err := ReadMarker(ctx, r.store, r.cfg.AppID); err != nil {
		return 0, err
	} else if !found {
		// The slot exists but the bootstrap that created it never finished
		// (the exported snapshot died with its process): redo it.
		return r.firstStart(stopCtx, sql)
	}
	if err := checkSlotUsable(slot, sql.Config().Database); err != nil {
		return 0, err
	}
	err = waitSlotFree(stopCtx, sql, r.cfg.Slot, r.cfg.Standby, func(pid int32) {
		r.log.Info("standby: slot is held by another consumer, waiting", "slot", r.cfg.Slot, "pid", pid)
	})
	if err != nil {
		return 0, err
	}
	return slot.ConfirmedLSN, nil
}

func (r *Relay) startReplication(ctx context.Context, start pglogrepl.LSN) (*pgconn.PgConn, error) {
	conn, err := connectReplication(ctx, r.cfg.Source)
	if err != nil {
		return nil, err
	}
	err = pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", r.cfg.Publication), "messages 'true'"},
	})
	if err != nil {
		conn.Close(ctx)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			ue := userErr(err, "replication slot %q is in use by another process: stop the other relay, or start this one with --standby to wait and take over", r.cfg.Slot)
			ue.Retryable = true
			return nil, ue
		}
		return nil, fmt.Errorf("start replication on slot %q: %w", r.cfg.Slot, err)
	}
	return conn, nil
}

// connectReplication opens a replication=database connection.
func connectReplication(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, userErr(err, "source DSN is invalid: %s", redact(err.Error()))
	}
	cfg.RuntimeParams["replication"] = "database"
	// The router parses timestamptz text output: pin its format.
	cfg.RuntimeParams["datestyle"] = "ISO, MDY"
	cfg.RuntimeParams["timezone"] = "UTC"
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection to %s:%d: %s", cfg.Host, cfg.Port, redact(rootCause(err)))
	}
	return conn, nil
}
