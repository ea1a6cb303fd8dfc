package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Relay moves outbox events from one replication slot into a sink, one
// table per topic. See the package documentation for its guarantees.
type Relay struct {
	cfg      Config
	store    storage.Store // the catalog's store
	sinkFor  SinkFor
	id       catalog.Identity       // the source this relay reads and its appId (preflight)
	appID    atomic.Pointer[string] // id.AppID, for other goroutines (AppID)
	sink     sink.Sink              // sinkFor(id.AppID)
	router   *outbox.Router
	mappings outbox.Mappings
	log      *slog.Logger
	metrics  *Metrics
	health   health

	// batchStart is when the committer began the last batch it committed
	// (or the session's start): every data file not committed yet was
	// written after it (the lease that keeps them from VACUUM).
	batchStart atomic.Int64

	tracer      trace.Tracer
	started     chan struct{}
	startedOnce sync.Once

	// streamLimit is the current session's stream timeout (liveness.go);
	// lastWalsender the backend pid of the previous session's replication
	// connection, until the server no longer holds the slot with it.
	streamLimit   time.Duration
	lastWalsender int32

	// Tracer, if set before Run, traces batches and topic commits (see
	// trace.go); nil records no span.
	Tracer trace.TracerProvider

	// Contracts, if set before Run, checks every event against its
	// contract (see contracts.go); Run keeps it fresh (Cache.Run).
	Contracts *contract.Cache
	// contractHolds are the topics held for a refused event; they outlive
	// a session (a hold that starts mid-transaction rewinds).
	contractHolds map[string]*contractHold
	// breaker counts each topic's refused rows and holds the topics that
	// pass its rate (breaker.go); it outlives a session.
	breaker *breaker
	// Protector, if set before Run, encrypts the personal fields of every
	// event whose contract marks them before it reaches a batch, and
	// redacts dead letters of such topics (package pii). An event whose
	// key cannot be had ends the session: it is read again, never written
	// in clear.
	Protector *pii.Protector

	// FollowTimeline runs when the source's server is on another timeline
	// than the one the marker names (package bootstrap, FollowTimeline):
	// it records the fork and returns the marker on the new timeline, or
	// refuses a slot the relay cannot safely stream from.
	FollowTimeline func(ctx context.Context, id catalog.Identity, src pgsource.Identity, slot pglogrepl.LSN) (catalog.Marker, error)
	// positions maps the source's commit LSNs to its positions (the txn
	// versions its topics record), walEnd is the source's WAL end read
	// with the free slot: set by each session's preflight.
	positions catalog.Positions
	walEnd    pglogrepl.LSN
	// setFailover, when set by preflight, is the FAILOVER setting the slot
	// is altered to before it is streamed from (PostgreSQL 17 and later).
	setFailover *bool

	// FirstStart runs when the slot does not exist and the store holds no
	// marker of the source (package bootstrap): it creates the slot,
	// copies the rows its exported snapshot sees into the topics under
	// id.AppID, writes the marker and returns the position to stream from.
	FirstStart func(ctx context.Context, id catalog.Identity) (pglogrepl.LSN, error)

	// Ahead, if set before Run, holds the first session's connections,
	// dialled while the caller prepared (DialAhead). Run discards them if
	// no session took them.
	Ahead *Ahead
}

// SinkFor returns the sink that writes the topic tables for the relay
// whose Delta txn appId is appID (the source's, see catalog.ResolveAppID).
type SinkFor func(appID string) sink.Sink

// New prepares a relay; it touches nothing until Run. store holds the
// catalog (package catalog), sinkFor gives the topic tables once each
// session's preflight has identified the source. Until then (and for a
// relay served without preflight, in tests) the appId is Config.AppID or,
// if empty, the slot's legacy one.
func New(cfg Config, store storage.Store, sinkFor SinkFor, mappings outbox.Mappings, log *slog.Logger, m *Metrics) *Relay {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	r := &Relay{cfg: cfg, store: store, sinkFor: sinkFor, router: outbox.NewRouter(mappings), mappings: mappings,
		log: log, metrics: m, tracer: tracerOf(nil), started: make(chan struct{}), contractHolds: map[string]*contractHold{},
		breaker: newBreaker(cfg.Breaker)}
	r.health.stall = cfg.ReadyStall
	appID := cfg.AppID
	if appID == "" {
		appID = catalog.LegacyAppID(cfg.Slot)
	}
	r.id = catalog.Identity{Source: catalog.Source{Slot: cfg.Slot}, AppID: appID}
	r.appID.Store(&appID)
	r.setSink(sinkFor(appID))
	m.forSlot(cfg.Slot)
	return r
}

// setSink makes s the relay's sink, the source of the table-state metric
// when it reports one.
func (r *Relay) setSink(s sink.Sink) {
	r.sink = s
	var states func() []sink.TableState
	if rep, ok := s.(sink.StateReporter); ok {
		states = rep.TableStates
	}
	r.metrics.reportStates(states, r.cfg.StatePaceFiles)
}

// AppID is the Delta txn appId the relay commits under: its source's
// (catalog.ResolveAppID), known once a session has started.
// Safe to call from any goroutine.
func (r *Relay) AppID() string { return *r.appID.Load() }

// bind makes id the relay's identity; the sink is replaced when the appId
// changes (the source behind the DSN is another one than last session's).
func (r *Relay) bind(ctx context.Context, id catalog.Identity) {
	if id.AppID != r.id.AppID {
		r.sink.Close(ctx)
		r.setSink(r.sinkFor(id.AppID))
	}
	if id.Source != r.id.Source {
		args := []any{"source", id.Source.String(), "app_id", id.AppID}
		if id.Adopted {
			r.log.Info("source identified: this source's progress of an earlier release is kept under its legacy appId", args...)
		} else {
			r.log.Info("source identified", args...)
		}
		r.metrics.source(id)
	}
	r.id = id
	r.appID.Store(&id.AppID)
}

// Started is closed once the first replication session streams.
func (r *Relay) Started() <-chan struct{} { return r.started }

// Ready reports whether the relay is streaming and committing: a session
// is open and, while events are pending, a commit succeeded within
// Config.ReadyStall. why says what is wrong when it is not.
func (r *Relay) Ready() (ok bool, why string) { return r.health.ready(time.Now()) }

// Run relays until ctx is cancelled or a fatal error. On cancellation it
// stops gracefully: the current batch is committed and acknowledged and Run
// returns nil; past Config.ShutdownTimeout every blocking call is cancelled
// and Run returns anyway. A transient failure (PostgreSQL restart, network,
// a commit that fails) ends the current session: Run logs it, reports not
// ready and starts a new session from the slot's confirmed position with
// exponential backoff (250 ms to 30 s; at most 5 s while the source cannot
// be connected to, as during a failover). Before the first session
// streams (except with Standby), and for errors a restart cannot cure, Run
// returns the error.
func (r *Relay) Run(ctx context.Context) error {
	defer func() { r.Ahead.Discard() }() // nil once a session took it
	if err := r.cfg.Validate(); err != nil {
		return usererr.New(err, "%s", err)
	}
	hard, cancel := afterStop(ctx, r.cfg.ShutdownTimeout)
	defer cancel()
	if r.Contracts != nil {
		go r.Contracts.Run(hard)
	}
	var last sessionEnd
	backoff := 250 * time.Millisecond
	for {
		began := time.Now()
		err := r.runSession(ctx, hard)
		r.health.setStreaming(false)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errRewind):
			continue
		case ctx.Err() != nil:
			if !retryable(err) {
				return err
			}
			r.log.Warn("stopped: the last session ended with an error; what it had not committed is read again on the next start", "err", err)
			return nil
		case errors.Is(err, pgsource.ErrSlotBusy) && r.cfg.Standby:
			backoff = 0 // lost a race for the slot: wait for it again at once
		case !retryable(err) || (!r.isStarted() && !r.cfg.Standby):
			// Before its first session a relay fails fast (let the
			// supervisor restart it); a standby is there to take over, so
			// it rides out a store or database that is down meanwhile.
			return err
		}
		if time.Since(began) > time.Minute {
			backoff = 250 * time.Millisecond
		}
		r.metrics.reconnect()
		last.log(r.log, err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(max(backoff*2, 250*time.Millisecond), maxBackoff(err))
	}
}

// maxBackoff is the longest wait before the next session after err: 30 s,
// but 5 s after a failure to connect to the source. A database that is
// failing over answers again within seconds of its standby's promotion,
// and a connection attempt costs the new primary nothing worth sparing.
func maxBackoff(err error) time.Duration {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// sessionEnd logs a session's failure once: a failure identical to the
// previous one is logged at debug level, except every five minutes.
type sessionEnd struct {
	msg    string
	logged time.Time
}

func (e *sessionEnd) log(log *slog.Logger, err error, retryIn time.Duration) {
	msg := err.Error()
	if msg == e.msg && time.Since(e.logged) < 5*time.Minute {
		log.Debug("replication session ended again; restarting", "err", err, "retry_in", retryIn)
		return
	}
	e.msg, e.logged = msg, time.Now()
	log.Error("replication session ended; not ready, restarting", "err", err, "retry_in", retryIn)
}

// afterStop returns a context that ends grace after ctx ends (or with its
// cancel): the deadline of a graceful stop.
func afterStop(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	hard, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	return hard, func() { stop(); cancel() }
}

func (r *Relay) markStarted() {
	r.startedOnce.Do(func() { close(r.started) })
}

func (r *Relay) isStarted() bool {
	select {
	case <-r.started:
		return true
	default:
		return false
	}
}

// runSession checks the source, opens the slot and streams until stop or
// error. Its two connections are dialled side by side, the first session's
// ahead of Run (sessionConns), and the replication connection may still be
// dialling while the preflight runs (predial). ctx ending asks for a
// graceful stop; hard ends every I/O.
//
// Every query of a session waits at most pgsource.QueryTimeout for the
// server (a bounded connection), the start of replication as long, and a
// close at most closeTimeout: nothing waits on the network without a
// deadline, and the stream itself has its stream timeout.
func (r *Relay) runSession(ctx, hard context.Context) error {
	repl, sql, err := r.sessionConns(hard)
	if err != nil {
		return err
	}
	defer repl.discard()
	defer closeWithin(hard, sql.Close)
	walSender, err := pgsource.WalSenderTimeout(hard, sql)
	if err != nil {
		return err
	}
	r.streamLimit = streamTimeout(r.cfg, walSender)
	r.endStale(hard, sql)
	start, err := r.preflight(ctx, hard, sql, repl)
	if err != nil {
		return err
	}
	// The lease is taken while the replication starts: on S3 its PUT
	// overlaps START_REPLICATION instead of following it.
	lease := async(func() (func(), error) { return r.holdLease(hard) })
	sctx, cancel := context.WithTimeout(hard, pgsource.QueryTimeout)
	conn, err := r.startReplication(sctx, repl, start)
	cancel()
	release, lerr := lease.wait()
	if lerr == nil {
		defer release()
	}
	if err != nil {
		return err
	}
	if pc, ok := conn.(*pgReplication); ok {
		r.lastWalsender = int32(pc.PID())
	}
	defer closeWithin(hard, conn.Close)
	if lerr != nil {
		return lerr
	}
	hb, stopHeartbeat := context.WithCancel(hard)
	defer stopHeartbeat()
	go r.heartbeat(hb)
	return r.serve(ctx, hard, conn, start)
}

// holdLease keeps the relay's lease (catalog.Lease) for the session: other
// relays' maintenance sharing the store keeps the data files this relay
// has written since the last batch it committed began, however short
// their file retention.
func (r *Relay) holdLease(ctx context.Context) (release func(), err error) {
	r.batchStart.Store(time.Now().UnixNano())
	since := func() time.Time { return time.Unix(0, r.batchStart.Load()) }
	h, err := catalog.HoldLease(ctx, r.store, r.id.AppID, nil, since, r.log)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", r.store, err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		h.Release(rctx, r.store, r.id.AppID)
	}, nil
}

// closeTimeout bounds closing a connection: a dead peer never answers the
// goodbye, and a full send buffer would block it.
const closeTimeout = 5 * time.Second

func closeWithin(hard context.Context, close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(hard), closeTimeout)
	defer cancel()
	_ = close(ctx)
}

// serve streams from conn, positioned at start, until ctx ends (graceful)
// or an error ends the session.
func (r *Relay) serve(ctx, hard context.Context, conn replicationConn, start pglogrepl.LSN) error {
	r.tracer = tracerOf(r.Tracer)
	com := newCommitter(r, start, conn.Wake)
	go com.run(hard)
	limit := r.streamLimit
	if limit == 0 {
		limit = streamTimeout(r.cfg, 0)
	}
	s := newSession(r, conn, com, limit)
	if err := s.prepare(hard); err != nil {
		com.close()
		return err
	}
	s.resolved = newResolver(r)
	go s.resolved.run(hard)
	defer s.resolved.close()
	r.health.setStreaming(true)
	r.markStarted()
	r.log.Info("streaming", "source", r.id.Source.String(), "app_id", r.id.AppID, "slot", r.cfg.Slot, "publication", r.cfg.Publication, "from_lsn", start, "store", r.store.String(),
		"stream_timeout", limit,
		"gomaxprocs", runtime.GOMAXPROCS(0), "cpus", runtime.NumCPU(), "sched", schedPolicyName())
	if err := s.stream(hard, ctx.Done()); err != nil {
		s.cur.abort()
		com.close()
		return err
	}
	r.sink.Close(hard)
	r.log.Info("stopped", "durable_lsn", com.durableLSN())
	return nil
}
