package bootstrap

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// copyJob is the state shared by the connections copying one snapshot.
type copyJob struct {
	root     storage.Store
	opts     Options
	lsn      pglogrepl.LSN // commit_lsn of every snapshot row: consistent point - 1
	takenAt  time.Time
	existing map[string]*idSet // read-only while copying
	places   *places           // where each topic's files go
	metrics  *metrics

	rows    atomic.Int64 // rows read
	dlSeq   atomic.Int64 // next seq of a dead letter (unique across connections)
	mu      sync.Mutex
	seqs    map[string]*atomic.Int64 // next seq of each topic
	results map[string][]unitFiles   // topic -> files by unit
	added   map[string]int64
	skipped map[string]int64
}

// seqOf returns the topic's seq counter, shared by the connections: seq
// is unique within a topic and increasing within each of its files.
func (j *copyJob) seqOf(name string) *atomic.Int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seqs == nil {
		j.seqs = map[string]*atomic.Int64{}
	}
	c := j.seqs[name]
	if c == nil {
		c = new(atomic.Int64)
		j.seqs[name] = c
	}
	return c
}

// unitFiles are the data files one worker of a unit wrote for one topic.
type unitFiles struct {
	unit, worker int
	adds         []delta.Add
}

// compareFiles orders files by unit, then worker.
func compareFiles(a, b unitFiles) int {
	if a.unit != b.unit {
		return a.unit - b.unit
	}
	return a.worker - b.worker
}

func (j *copyJob) record(name string, unit, worker int, adds []delta.Add, added, skipped int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(adds) > 0 {
		j.results[name] = append(j.results[name], unitFiles{unit: unit, worker: worker, adds: adds})
	}
	j.added[name] += added
	j.metrics.topicDone(name, added, skipped)
	if skipped > 0 {
		j.skipped[name] += skipped
	}
}

// openSnapshotConn opens a connection whose transaction reads the exported
// snapshot.
func openSnapshotConn(ctx context.Context, dsn, snapshot string) (*pgx.Conn, error) {
	cfg, err := pgsource.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	// COPY streams megabytes: read the socket 64 KiB at least at a time,
	// through 256 KiB, instead of each of the server's 8 KiB flushes on its
	// own wake-up (socket reads and wake-ups were a third of a bootstrap's
	// CPU).
	pgsource.GatherBulk(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, pgsource.ConnectError(&cfg.Config, err)
	}
	// A synchronized scan would start where another scan of the table is
	// and wrap around; snapshot files promise rows in physical order.
	qs := []string{"SET synchronize_seqscans = off", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
	if snapshot != "" { // "" = a new snapshot, taken by the first query
		qs = append(qs, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot))
	}
	for _, q := range qs {
		if _, err := conn.Exec(ctx, q); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("import snapshot %s: %q: %w", snapshot, q, err)
		}
	}
	return conn, nil
}

// unitWriter copies one unit into one file writer per topic it meets and
// one for dead letters.
type unitWriter struct {
	j      *copyJob
	u      *unit
	worker int // which of the unit's workers (see fanOut)
	router *outbox.Router
	outs   map[string]*topicOut
	last   *topicOut // the topic of the previous row: rows come in runs
	dead   *topic.FileWriter
	fast   fastRow
	ctx    context.Context // the unit's, for the Protector's key look-ups
	pii    pii.Scratch     // the Protector's work space: an encrypted payload
	table  string          // the source table being read ("schema.table")
	rows   int64
	dls    [2]int64 // dead letters added, skipped
}

// topicOut is one topic's share of a unit.
type topicOut struct {
	name           string
	w              *topic.FileWriter
	set            *idSet        // events the topic already holds
	seq            *atomic.Int64 // the topic's next seq, shared by all units
	judged         bool          // the topic has contracts: its events are judged
	added, skipped int64
}

// copyUnit reads the unit's rows through conn and uploads its files. A
// block-range unit read in binary is encoded by opts.Workers workers
// (fanOut); other units by one.
func (j *copyJob) copyUnit(ctx context.Context, conn *pgx.Conn, router *outbox.Router, u *unit) error {
	ws := []*unitWriter{{j: j, u: u, router: router, outs: map[string]*topicOut{}, ctx: ctx}}
	for k := 1; u.rng != nil && k < j.opts.Workers; k++ {
		ws = append(ws, &unitWriter{j: j, u: u, worker: k, router: outbox.NewRouter(j.opts.Mappings), outs: map[string]*topicOut{}, ctx: ctx})
	}
	defer func() {
		for _, w := range ws {
			w.abort()
		}
	}()
	start := time.Now()
	for _, s := range u.parts {
		var err error
		if len(ws) > 1 && s.kinds != nil {
			err = j.fanOutPart(ctx, conn, s, ws)
		} else {
			err = ws[0].copyPart(ctx, conn, s)
		}
		if err != nil {
			return fmt.Errorf("copy %s of %s: %w", u.label(), s.qualified(), err)
		}
	}
	read := time.Since(start)
	var rows int64
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range ws {
		rows += w.rows
		g.Go(func() error { return w.close(gctx) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	j.opts.Log.Debug("bootstrap: unit copied", "unit", u.label(), "rows", rows, "workers", len(ws),
		"read", read.Round(time.Millisecond), "upload", (time.Since(start) - read).Round(time.Millisecond))
	return nil
}

func (w *unitWriter) copyPart(ctx context.Context, conn *pgx.Conn, s *source) error {
	if err := w.planScan(ctx, conn, s); err != nil {
		return err
	}
	parser := w.rowParser(s)
	tag, err := conn.PgConn().CopyTo(ctx, parser, w.u.copySQL(s))
	w.j.metrics.addRows(tag.RowsAffected())
	if err != nil {
		return err
	}
	return parser.finish()
}

// planScan steers the planner for the part's query. A topic unit with an
// index led by the topic column reads through it: the rows come in order
// and only the topic's pages are read. Left alone, the planner prefers a
// bitmap or full scan plus a sort when occurred_at is not correlated with
// the physical order. A range unit is a sequential or TID range scan.
func (w *unitWriter) planScan(ctx context.Context, conn *pgx.Conn, s *source) error {
	scan := map[bool]string{true: "off", false: "on"}[s.indexed && w.u.rng == nil]
	_, err := conn.Exec(ctx, "SELECT set_config('enable_seqscan', $1, true), set_config('enable_bitmapscan', $1, true)", scan)
	return err
}

// fanOutPart copies one binary part with every worker of the unit.
func (j *copyJob) fanOutPart(ctx context.Context, conn *pgx.Conn, s *source, ws []*unitWriter) error {
	if err := ws[0].planScan(ctx, conn, s); err != nil {
		return err
	}
	parsers := make([]*binRows, len(ws))
	for k, w := range ws {
		parsers[k] = w.rowParser(s).(*binRows)
		parsers[k].header = true // the stream's header stays with fanOut
	}
	f := newFanOut(ctx, len(s.rel.Columns), len(ws), s.topicColumn())
	return f.run(func(ctx context.Context, sink *fanOut) error {
		tag, err := conn.PgConn().CopyTo(ctx, sink, ws[0].u.copySQL(s))
		j.metrics.addRows(tag.RowsAffected())
		return err
	}, parsers)
}

// topicColumn returns the index of the mapping's topic column, -1 if the
// table has none.
func (s *source) topicColumn() int {
	return slices.IndexFunc(s.rel.Columns, func(c decoding.Column) bool { return c.Name == s.mapping.Topic })
}

// copyParser is what COPY output is written to.
type copyParser interface {
	io.Writer
	finish() error
}

// rowParser returns the COPY output parser of one table's share: binary
// when the table's column types allow it (see source.chooseFormat), with
// events built straight from the binary values when the mapping's columns
// have the usual types; text otherwise.
func (w *unitWriter) rowParser(s *source) copyParser {
	w.table = s.qualified()
	row := decoding.Row{Relation: s.rel, Op: decoding.OpInsert, CommitLSN: w.j.lsn, CommitTime: w.j.takenAt}
	if s.kinds == nil {
		return newCopyRows(len(s.rel.Columns), func(d []decoding.Datum) error {
			if err := w.nextSeq(&row); err != nil {
				return err
			}
			row.New = d
			return w.route(&row)
		})
	}
	text := binTextRow{kinds: s.kinds}
	fast := &w.fast
	fast.ev = outbox.Event{CommitLSN: int64(w.j.lsn), CommitTime: w.j.takenAt.UTC().Truncate(time.Microsecond)}
	return newBinRows(len(s.rel.Columns), func(d []decoding.Datum) error {
		if err := w.nextSeq(&row); err != nil {
			return err
		}
		if s.fast != nil {
			if s.fast.build(d, fast) {
				return w.addEvent(&fast.ev, fast.key, true)
			}
		}
		var err error
		if row.New, err = text.convert(d); err != nil {
			return err
		}
		return w.route(&row)
	})
}

// nextSeq counts a row read; an event's seq is given when it is appended.
func (w *unitWriter) nextSeq(*decoding.Row) error {
	w.rows++
	w.j.rows.Add(1)
	return nil
}

func (w *unitWriter) route(row *decoding.Row) error {
	ev, dl, err := w.router.Route(row)
	if err != nil {
		return err
	}
	switch {
	case ev != nil:
		k, ok := eventKey(ev.ID)
		return w.addEvent(ev, k, ok)
	case dl != nil:
		return w.addDeadLetter(dl)
	}
	return nil
}

// addEvent appends ev, with the next seq of its topic, unless the topic
// already holds its key (ok: ev.ID is a uuid, k its bytes). ev's strings
// may alias reused buffers: the writer copies them.
func (w *unitWriter) addEvent(ev *outbox.Event, k idKey, ok bool) error {
	o := w.last
	if o == nil || o.name != ev.Topic {
		var err error
		if o, err = w.out(ev.Topic); err != nil {
			return err
		}
		w.last = o
	}
	if ok && o.set.has(k) {
		o.skipped++
		return nil
	}
	if o.judged {
		if refused, err := w.judge(ev); refused || err != nil {
			return err
		}
	}
	if p := w.j.opts.Protector; p != nil {
		dl, err := p.Event(w.ctx, ev, &w.pii) // ev.Payload may alias it: Append copies it
		if err != nil {
			return fmt.Errorf("personal data of an event of topic %q (id %s) cannot be encrypted: %w", ev.Topic, ev.ID, err)
		}
		if dl != nil {
			return w.addDeadLetter(dl)
		}
	}
	seq := o.seq.Add(1) - 1
	if seq > math.MaxInt32 {
		return fmt.Errorf("topic %q: more than 2^31 snapshot rows: seq overflows", o.name)
	}
	ev.Seq = int32(seq)
	o.added++
	if err := o.w.Append(ev); err != nil {
		return err
	}
	return w.boundMemory()
}

// out returns the unit's writer of a topic, opening it on first use.
func (w *unitWriter) out(name string) (*topicOut, error) {
	if o := w.outs[name]; o != nil {
		return o, nil
	}
	if w.u.topic != nil && name != *w.u.topic {
		return nil, fmt.Errorf("row of topic %q in the unit of topic %q", name, *w.u.topic)
	}
	name = strings.Clone(name)
	// A grouped topic's files go to its group's table, one writer per
	// topic: each file holds one topic (its stats' topic bounds are equal),
	// which readers of another topic of the group skip unread.
	p, err := w.j.places.of(w.ctx, name)
	if err != nil {
		return nil, err
	}
	judged, err := w.j.governed(w.ctx, name)
	if err != nil {
		return nil, err
	}
	o := &topicOut{name: name, set: w.j.existing[name], seq: w.j.seqOf(name), judged: judged,
		w: topic.NewFileWriter(w.j.places.store(p), w.j.opts.Files)}
	w.outs[name] = o
	return o, nil
}

// unitBudget bounds the unencoded rows a unit holds across its topics;
// past it the largest topic's rows are encoded into a row group, so memory
// does not grow with the number of topics.
const unitBudget = 8 << 20

// boundMemory looks at the writers every 1024 rows.
func (w *unitWriter) boundMemory() error {
	if w.rows&1023 != 0 || len(w.outs) < 2 {
		return nil
	}
	return topic.BoundPending(unitBudget, func(yield func(*topic.FileWriter) bool) {
		for _, o := range w.outs {
			if !yield(o.w) {
				return
			}
		}
	})
}

func (w *unitWriter) addDeadLetter(dl *outbox.DeadLetter) error {
	if p := w.j.opts.Protector; p != nil {
		if err := p.DeadLetter(w.ctx, dl); err != nil { // before its identity: what the table holds is redacted
			return fmt.Errorf("redact a dead letter of topic %q: %w", dl.Topic, err)
		}
		if dl.SourceTable == "" {
			dl.SourceTable = w.table
		}
	}
	if w.j.existing[outbox.DeadLetterTopic].has(deadLetterKey(dl.SourceTable, dl.RawRow)) {
		w.dls[1]++
		return nil
	}
	if w.dead == nil {
		opts := w.j.opts.Files
		opts.DeadLetter = true
		w.dead = topic.NewFileWriter(storage.Sub(w.j.root, outbox.DeadLetterTopic), opts)
	}
	dl.Seq = int32(w.j.dlSeq.Add(1) - 1)
	w.dls[0]++
	return w.dead.AppendDeadLetter(dl)
}

// closeParallelism is how many files of a worker are committed to the
// store at once: a commit waits for fsync (local) or a PUT (S3).
const closeParallelism = 4

// close uploads the worker's files (they stay invisible until the topic's
// snapshot commit) and records them.
func (w *unitWriter) close(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(closeParallelism)
	for name, o := range w.outs {
		g.Go(func() error {
			adds, err := o.w.Close(gctx)
			if err != nil {
				return fmt.Errorf("upload files of topic %q: %w", name, err)
			}
			w.j.record(name, w.u.index, w.worker, adds, o.added, o.skipped)
			return nil
		})
	}
	if dead := w.dead; dead != nil {
		g.Go(func() error {
			adds, err := dead.Close(gctx)
			if err != nil {
				return fmt.Errorf("upload dead letters: %w", err)
			}
			w.j.record(outbox.DeadLetterTopic, w.u.index, w.worker, adds, w.dls[0], w.dls[1])
			return nil
		})
	} else if w.dls[1] > 0 {
		w.j.record(outbox.DeadLetterTopic, w.u.index, w.worker, nil, 0, w.dls[1])
	}
	return g.Wait()
}

func (w *unitWriter) abort() {
	for _, o := range w.outs {
		o.w.Abort()
	}
	if w.dead != nil {
		w.dead.Abort()
	}
}
