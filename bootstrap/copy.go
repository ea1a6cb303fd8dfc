package bootstrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
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
	metrics  *metrics

	rows    atomic.Int64 // rows read
	dlSeq   atomic.Int64 // next seq of a dead letter (unique across connections)
	mu      sync.Mutex
	results map[string][]unitFiles // topic -> files by unit
	added   map[string]int64
	skipped map[string]int64
}

// unitFiles are the data files one unit wrote for one topic.
type unitFiles struct {
	unit int
	adds []delta.Add
}

func (j *copyJob) record(name string, unit int, adds []delta.Add, added, skipped int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(adds) > 0 {
		j.results[name] = append(j.results[name], unitFiles{unit: unit, adds: adds})
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
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse source DSN: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	// COPY streams megabytes: read the socket in 256 KiB gulps instead of
	// pgproto3's 8 KiB (read syscalls were a fifth of a bootstrap's CPU).
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, 256<<10), w)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to source: %w", err)
	}
	qs := []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
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

// unitWriter copies one unit: its topic's events and its dead letters.
type unitWriter struct {
	j       *copyJob
	u       *unit
	router  *outbox.Router
	events  *topic.FileWriter
	dead    *topic.FileWriter
	evTopic string
	evSet   *idSet // events the topic already holds
	fast    fastRow
	seq     int64
	counts  [4]int64 // events added, events skipped, dead letters added, dead letters skipped
}

// copyUnit reads the unit's rows through conn and uploads its files.
func (j *copyJob) copyUnit(ctx context.Context, conn *pgx.Conn, router *outbox.Router, u *unit) error {
	w := &unitWriter{j: j, u: u, router: router}
	defer w.abort()
	start := time.Now()
	for _, s := range u.parts {
		if err := w.copyPart(ctx, conn, s); err != nil {
			return fmt.Errorf("copy topic %s of %s: %w", u.label(), s.qualified(), err)
		}
	}
	read := time.Since(start)
	if err := w.close(ctx); err != nil {
		return err
	}
	j.opts.Log.Debug("bootstrap: topic copied", "topic", u.label(), "rows", w.seq, "read", read.Round(time.Millisecond),
		"upload", (time.Since(start) - read).Round(time.Millisecond))
	return nil
}

func (w *unitWriter) copyPart(ctx context.Context, conn *pgx.Conn, s *source) error {
	// With an index led by the topic column, read through it: the rows come
	// in order and only the topic's pages are read. Left alone, the planner
	// prefers a bitmap or full scan plus a sort when occurred_at is not
	// correlated with the physical order, which costs a sort per topic.
	scan := map[bool]string{true: "off", false: "on"}[s.indexed]
	if _, err := conn.Exec(ctx, "SELECT set_config('enable_seqscan', $1, true), set_config('enable_bitmapscan', $1, true)", scan); err != nil {
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
			fast.ev.Seq = int32(row.Seq)
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

// nextSeq gives row the next position of the unit.
func (w *unitWriter) nextSeq(row *decoding.Row) error {
	if w.seq > math.MaxInt32 {
		return errors.New("more than 2^31 rows in one topic: seq overflows")
	}
	row.Seq = int(w.seq)
	w.seq++
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

// addEvent appends ev unless the topic already holds its key (ok: ev.ID
// is a uuid, k its bytes). ev's strings may alias reused buffers: the
// writer copies them.
func (w *unitWriter) addEvent(ev *outbox.Event, k idKey, ok bool) error {
	if w.events == nil {
		w.evTopic = strings.Clone(ev.Topic)
		w.evSet = w.j.existing[w.evTopic]
		w.events = topic.NewFileWriter(storage.Sub(w.j.root, w.evTopic), w.j.opts.Files)
	} else if ev.Topic != w.evTopic {
		return fmt.Errorf("row of topic %q in the unit of topic %q", ev.Topic, w.evTopic)
	}
	if ok && w.evSet.has(k) {
		w.counts[1]++
		return nil
	}
	w.counts[0]++
	return w.events.Append(ev)
}

func (w *unitWriter) addDeadLetter(dl *outbox.DeadLetter) error {
	if w.j.existing[outbox.DeadLetterTopic].has(deadLetterKey(dl.SourceTable, dl.RawRow)) {
		w.counts[3]++
		return nil
	}
	if w.dead == nil {
		opts := w.j.opts.Files
		opts.DeadLetter = true
		w.dead = topic.NewFileWriter(storage.Sub(w.j.root, outbox.DeadLetterTopic), opts)
	}
	dl.Seq = int32(w.j.dlSeq.Add(1) - 1)
	w.counts[2]++
	return w.dead.AppendDeadLetter(dl)
}

// close uploads the unit's files (they stay invisible until the topic's
// snapshot commit) and records them.
func (w *unitWriter) close(ctx context.Context) error {
	if w.events != nil {
		adds, err := w.events.Close(ctx)
		w.events = nil
		if err != nil {
			return fmt.Errorf("upload files of topic %q: %w", w.evTopic, err)
		}
		w.j.record(w.evTopic, w.u.index, adds, w.counts[0], w.counts[1])
	}
	if w.dead != nil {
		adds, err := w.dead.Close(ctx)
		w.dead = nil
		if err != nil {
			return fmt.Errorf("upload dead letters: %w", err)
		}
		w.j.record(outbox.DeadLetterTopic, w.u.index, adds, w.counts[2], w.counts[3])
	} else if w.counts[3] > 0 {
		w.j.record(outbox.DeadLetterTopic, w.u.index, nil, 0, w.counts[3])
	}
	return nil
}

func (w *unitWriter) abort() {
	if w.events != nil {
		w.events.Abort()
	}
	if w.dead != nil {
		w.dead.Abort()
	}
}
