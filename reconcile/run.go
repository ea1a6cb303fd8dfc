package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// checker holds the state of one run.
type checker struct {
	opts Options
	src  *source
	// ours says whether a row's source (the source column's appId) is the
	// one this run checks: other sources' events in shared topics are not
	// "unexpected".
	ours    func(source string) bool
	aux     *pgx.Conn
	root    storage.Store
	log     *slog.Logger
	horizon int64 // µs: rows older may have been cleaned up
	dead    map[string]bool
	// prefetch holds each registered topic's log, counted per candidate
	// window while the source was being counted.
	prefetch map[string]*prefetched
	// groups are the store's topic groups, listed once a run (nil until
	// then); tables are the tables read, each once, shared by the topics
	// they hold (tables.go).
	groups []catalog.Group
	tables map[string]*tableLog
}

// prefetched is a topic's log side, read ahead.
type prefetched struct {
	tl         *topicLog
	counts     []int64
	unreadable [][]string
	err        error
}

// prefetchLogs loads and counts every registered (or requested) topic's
// log over the candidate windows. It runs beside the source count: the
// source side works in PostgreSQL, this one in the relay's process.
func (c *checker) prefetchLogs(ctx context.Context, candidates []Window) {
	c.prefetch = map[string]*prefetched{}
	if len(candidates) == 0 {
		return
	}
	names := c.opts.Topics
	if len(names) == 0 {
		reg, err := registeredTopics(ctx, c.root)
		if err != nil {
			return // checkTopic reads the logs itself and reports the error
		}
		names = reg
	}
	bounds := windowBounds(candidates)
	bus := make([]int64, len(bounds))
	for i, b := range bounds {
		bus[i] = us(b)
	}
	for _, topic := range names {
		if strings.HasPrefix(topic, "_") {
			continue
		}
		p := &prefetched{}
		if p.tl, p.err = c.loadLog(ctx, topic); p.err == nil {
			p.counts, p.unreadable, p.err = p.tl.countWindows(ctx, bus)
		}
		c.prefetch[topic] = p
	}
}

// Run reconciles the closed windows of [From, To) for every topic. An error
// means the run could not be made (connection, snapshot, source query); a
// topic whose log cannot be read gives StatusError results instead.
func Run(ctx context.Context, dsn string, root storage.Store, opts Options, log *slog.Logger) (rep *Report, err error) {
	started := time.Now()
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctx, span := opts.tracer().Start(ctx, "deltabus.reconcile")
	defer func() { endRun(span, rep, err) }()
	if log == nil {
		log = slog.Default()
	}
	var conn, aux *pgx.Conn
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { conn, err = connect(gctx, dsn); return err })
	g.Go(func() (err error) { aux, err = connect(gctx, dsn); return err })
	err = g.Wait()
	for _, c := range []*pgx.Conn{conn, aux} {
		if c != nil {
			defer c.Close(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		return nil, err
	}
	sts, err := outboxTables(ctx, aux, opts.Tables, opts.Publication, opts.Mappings)
	if err != nil {
		return nil, err
	}
	srcID, err := pgsource.Identify(ctx, aux, opts.Slot)
	if err != nil {
		return nil, err
	}
	id, err := catalog.ResolveAppID(ctx, root, srcID.Source, opts.AppID)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin source snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	c := &checker{opts: opts, src: &source{tx: tx, tables: sts}, ours: oursOf(id.AppID), aux: aux, root: root, log: log}
	rep, err = c.run(ctx)
	if err != nil {
		return nil, err
	}
	rep.AppID = id.AppID
	rep.Took = time.Since(started)
	return rep, nil
}

// outboxTables resolves the outbox tables to check: the given ones, or
// every table of the publication.
func outboxTables(ctx context.Context, conn *pgx.Conn, tables []Table, publication string, ms outbox.Mappings) ([]sourceTable, error) {
	if len(tables) == 0 {
		var err error
		if tables, err = PublicationTables(ctx, conn, publication); err != nil {
			return nil, err
		}
	}
	return resolveTables(ctx, conn, tables, ms)
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return pgsource.Connect(ctx, dsn)
}

func (c *checker) run(ctx context.Context) (*Report, error) {
	var t0 time.Time
	var w0s string
	if err := c.src.tx.QueryRow(ctx, `SELECT now(), pg_current_wal_insert_lsn()::text`).Scan(&t0, &w0s); err != nil {
		return nil, fmt.Errorf("sample server time and WAL position: %w", err)
	}
	w0, err := pglogrepl.ParseLSN(w0s)
	if err != nil {
		return nil, fmt.Errorf("parse WAL position %q: %w", w0s, err)
	}
	t0 = t0.UTC()
	o := c.opts
	rep := &Report{RunID: uuid.NewString(), RunAt: t0, Window: o.Window.String(), Lateness: o.Lateness.String(),
		Horizon: t0.Add(-o.Retention), WAL: w0.String(), Results: []Result{}, Skipped: []Skipped{}}
	for _, t := range c.src.tables {
		rep.Tables = append(rep.Tables, t.String())
	}
	c.horizon = rep.Horizon.UnixMicro()
	rep.From, rep.To = o.From.UTC(), o.To.UTC()
	if o.From.IsZero() {
		rep.To = t0.Truncate(o.Window)
		rep.From = rep.To.Add(-o.Last)
	}
	// Count the source over the windows closed by time while waiting for
	// the relay to confirm W0 (two connections): the wait costs nothing.
	candidates := c.classify(&Report{Horizon: rep.Horizon}, windows(rep.From, rep.To, o.Window), t0, "")
	counted, logsRead := make(chan struct{}), make(chan struct{})
	var srcCounts map[string][]int64
	var srcErr error
	go func() {
		defer close(counted)
		if len(candidates) > 0 {
			srcCounts, srcErr = c.src.bucketCounts(ctx, windowBounds(candidates), c.opts.Topics)
		}
	}()
	go func() {
		defer close(logsRead)
		c.prefetchLogs(ctx, candidates)
	}()
	durable, reached, err := waitDurable(ctx, c.aux, o.Slot, w0, o.DurableWait)
	<-counted
	<-logsRead
	notDurable := ""
	switch {
	case errors.Is(err, ErrNoSlot):
		notDurable = fmt.Sprintf("relay slot %q does not exist, so no position is durable", o.Slot)
	case err != nil:
		return nil, err
	case !reached:
		notDurable = fmt.Sprintf("relay slot %q confirmed %s, not yet the WAL position %s sampled at %s (waited %s)",
			o.Slot, durable, w0, t0.Format(time.RFC3339), o.DurableWait)
	}
	rep.Durable = durable.String()
	closed := c.classify(rep, windows(rep.From, rep.To, o.Window), t0, notDurable)
	if len(closed) == 0 {
		return rep, nil
	}
	if srcErr != nil {
		return nil, srcErr
	}
	if err := c.checkAll(ctx, rep, closed, srcCounts); err != nil {
		return nil, err
	}
	return rep, c.resolveLate(ctx, rep)
}

// classify returns the closed windows (contiguous) and records the others
// as skipped.
func (c *checker) classify(rep *Report, all []Window, t0 time.Time, notDurable string) []Window {
	var closed []Window
	for _, w := range all {
		switch {
		case !w.End.After(rep.Horizon):
			rep.Skipped = append(rep.Skipped, Skipped{w, fmt.Sprintf("beyond retention: ends before the horizon %s, the source may no longer hold its rows", rep.Horizon.Format(time.RFC3339))})
		case w.End.Add(c.opts.Lateness).After(t0):
			rep.Skipped = append(rep.Skipped, Skipped{w, fmt.Sprintf("open: end + lateness %s is after the check time %s", c.opts.Lateness, t0.Format(time.RFC3339))})
		case notDurable != "":
			rep.Skipped = append(rep.Skipped, Skipped{w, "open: " + notDurable})
		default:
			closed = append(closed, w)
		}
	}
	return closed
}

// windowBounds returns the edges of contiguous windows.
func windowBounds(ws []Window) []time.Time {
	bounds := make([]time.Time, 0, len(ws)+1)
	for _, w := range ws {
		bounds = append(bounds, w.Start)
	}
	return append(bounds, ws[len(ws)-1].End)
}

// checkAll verifies every topic over the closed windows, given the source's
// counts per topic and window.
func (c *checker) checkAll(ctx context.Context, rep *Report, closed []Window, srcCounts map[string][]int64) error {
	bounds := windowBounds(closed)
	topics, err := c.topics(ctx, srcCounts)
	if err != nil {
		return err
	}
	for _, topic := range topics {
		src := srcCounts[topic]
		if src == nil {
			src = make([]int64, len(closed))
		}
		res, err := c.checkTopic(ctx, topic, closed, bounds, src)
		if err != nil {
			return err
		}
		rep.Results = append(rep.Results, res...)
	}
	return nil
}

// topics is Options.Topics, else the registered topics plus the topics the
// source has in range; internal names ("_...") are left out.
func (c *checker) topics(ctx context.Context, srcCounts map[string][]int64) ([]string, error) {
	if len(c.opts.Topics) > 0 {
		return slices.Sorted(slices.Values(c.opts.Topics)), nil
	}
	reg, err := registeredTopics(ctx, c.root)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, t := range reg {
		set[t] = true
	}
	for t := range srcCounts {
		set[t] = true
	}
	var out []string
	for t := range set {
		if !strings.HasPrefix(t, "_") {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// oursOf is the row filter of the relay appID: its rows, and rows without
// a source (written by a release that kept none: the reconciler cannot
// tell whose they are, and checks them as before, against this source).
func oursOf(appID string) func(string) bool {
	return func(src string) bool { return src == appID || src == "" }
}
