package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
)

// Janitor defaults.
const (
	DefaultJanitorBatch = 5_000
	DefaultJanitorPause = 100 * time.Millisecond
)

// JanitorOptions configure one retention pass over the outbox tables.
type JanitorOptions struct {
	Retention   time.Duration // delete rows with occurred_at older than now - Retention
	BatchSize   int           // rows per DELETE statement
	Pause       time.Duration // between statements
	Slot        string
	Publication string
	Tables      []Table // default: the publication's tables
	Mappings    outbox.Mappings
	DurableWait time.Duration
	DryRun      bool // count what would be deleted, delete nothing
}

func (o JanitorOptions) withDefaults() JanitorOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultJanitorBatch
	}
	if o.Pause < 0 {
		o.Pause = 0
	}
	if o.DurableWait <= 0 {
		o.DurableWait = DefaultDurableWait
	}
	if o.Slot == "" {
		o.Slot = "deltabus"
	}
	if o.Publication == "" {
		o.Publication = "deltabus"
	}
	return o
}

// JanitorReport says what one pass deleted.
type JanitorReport struct {
	Cutoff  time.Time        `json:"cutoff"`
	WAL     string           `json:"walLsn"`
	Durable string           `json:"durableLsn"`
	Deleted map[string]int64 `json:"deleted"` // per table (would delete, on a dry run)
	Batches int              `json:"batches"`
	DryRun  bool             `json:"dryRun"`
	Took    time.Duration    `json:"tookNs"`
}

// RunJanitor deletes outbox rows that are older than the retention AND
// below the relay's durable position, in batches of BatchSize rows (one
// short transaction each) with Pause between them.
//
// The rule: in one statement it samples the server time T0, the WAL insert
// position W0 and the oldest transaction still running (snapshot xmin X);
// it waits until the relay's slot has confirmed W0; then it deletes only
// rows with occurred_at < T0 - Retention whose inserting transaction is
// older than X. Such a row committed before W0 was sampled, so its event is
// in a committed Delta version: the relay confirms no position past an
// event it has not committed, a grouped topic's rows waiting for their
// group's next commit (its commit interval) included. Rows it skips are
// taken by a later pass.
func RunJanitor(ctx context.Context, dsn string, opts JanitorOptions, log *slog.Logger) (*JanitorReport, error) {
	started := time.Now()
	opts = opts.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sts, err := outboxTables(ctx, conn, opts.Tables, opts.Publication, opts.Mappings)
	if err != nil {
		return nil, err
	}
	var t0 time.Time
	var w0s, xs string
	err = conn.QueryRow(ctx, `SELECT now(), pg_current_wal_insert_lsn()::text, pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&t0, &w0s, &xs)
	if err != nil {
		return nil, fmt.Errorf("sample server time, WAL position and snapshot: %w", err)
	}
	w0, err := pglogrepl.ParseLSN(w0s)
	if err != nil {
		return nil, fmt.Errorf("parse WAL position %q: %w", w0s, err)
	}
	x8, err := strconv.ParseUint(xs, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("parse snapshot xmin %q: %w", xs, err)
	}
	rep := &JanitorReport{Cutoff: t0.Add(-opts.Retention).UTC(), WAL: w0.String(), Deleted: map[string]int64{}, DryRun: opts.DryRun}
	durable, reached, err := waitDurable(ctx, conn, opts.Slot, w0, opts.DurableWait)
	if err != nil {
		return nil, err
	}
	rep.Durable = durable.String()
	if !reached {
		return nil, fmt.Errorf("relay slot %q confirmed %s, not the WAL position %s within %s: the relay is behind or stopped, nothing deleted",
			opts.Slot, durable, w0, opts.DurableWait)
	}
	j := &janitor{conn: conn, opts: opts, log: log, rep: rep, xmin: strconv.FormatUint(x8&0xffffffff, 10)}
	for _, t := range sts {
		if err := j.table(ctx, t); err != nil {
			return nil, err
		}
	}
	rep.Took = time.Since(started)
	return rep, nil
}

type janitor struct {
	conn *pgx.Conn
	opts JanitorOptions
	log  *slog.Logger
	rep  *JanitorReport
	xmin string // 32-bit xid of the sampled snapshot xmin
}

// table walks one outbox table topic by topic over its (topic,
// occurred_at) index.
func (j *janitor) table(ctx context.Context, t sourceTable) error {
	q := fmt.Sprintf(`WITH RECURSIVE t(topic) AS (
		(SELECT %[1]s FROM %[2]s ORDER BY 1 LIMIT 1)
		UNION ALL
		SELECT (SELECT %[1]s FROM %[2]s WHERE %[1]s > t.topic ORDER BY 1 LIMIT 1) FROM t WHERE t.topic IS NOT NULL
	) SELECT topic::text FROM t WHERE topic IS NOT NULL`, t.topic, t.qualified)
	rows, err := j.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("list topics of %s: %w", t, err)
	}
	topics, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list topics of %s: %w", t, err)
	}
	for _, topic := range topics {
		if err := j.topic(ctx, t, topic); err != nil {
			return err
		}
	}
	return nil
}

// topic deletes one topic's old rows in keyset batches.
func (j *janitor) topic(ctx context.Context, t sourceTable, topic string) error {
	sel := fmt.Sprintf(`SELECT %[1]s AS id, %[2]s AS occ FROM %[3]s
		WHERE %[4]s = $1 AND %[2]s < $2 AND age(xmin) > age($3::text::xid)
		AND ($4::timestamptz IS NULL OR (%[2]s, %[1]s) > ($4, $5::text::%[5]s))
		ORDER BY %[2]s, %[1]s LIMIT $6`, t.id, t.occurred, t.qualified, t.topic, t.idType)
	last := `SELECT (SELECT count(*) FROM %s), occ, id::text FROM b ORDER BY occ DESC, id DESC LIMIT 1`
	q := fmt.Sprintf(`WITH b AS (%s), d AS (DELETE FROM %s o USING b WHERE o.%s = b.id RETURNING 1) `+last, sel, t.qualified, t.id, "d")
	if j.opts.DryRun {
		q = fmt.Sprintf(`WITH b AS (%s) `+last, sel, "b")
	}
	var lastOcc *time.Time
	var lastID *string
	for {
		n, occ, id, err := j.batch(ctx, q, topic, lastOcc, lastID)
		if err != nil {
			return fmt.Errorf("delete old rows of %s topic %q: %w", t, topic, err)
		}
		if n == 0 {
			return nil
		}
		j.rep.Deleted[t.String()] += n
		j.rep.Batches++
		lastOcc, lastID = &occ, &id
		j.log.Debug("janitor batch", "table", t.String(), "topic", topic, "rows", n, "dry_run", j.opts.DryRun)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(j.opts.Pause):
		}
	}
}

// batch runs one statement and returns how many rows it touched and the
// greatest (occurred_at, id) among them, in the SQL order.
func (j *janitor) batch(ctx context.Context, q, topic string, lastOcc *time.Time, lastID *string) (int64, time.Time, string, error) {
	var n int64
	var occ time.Time
	var id string
	err := j.conn.QueryRow(ctx, q, topic, j.rep.Cutoff, j.xmin, lastOcc, lastID, j.opts.BatchSize).Scan(&n, &occ, &id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, "", nil
	}
	return n, occ, id, err
}
