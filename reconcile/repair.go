package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/storage"
)

// RepairOptions configure Repair beside the check's Options.
type RepairOptions struct {
	Contracts *contract.Cache // nil: no contract is checked
	Protector *pii.Protector  // nil: no personal data is protected
	Actor     string          // who asked (default: the OS user)
	DryRun    bool            // find and judge the missing events, publish nothing
}

// Repaired is what Repair did: the check that found the gaps (its results
// name, per window, how many missing events the repair published), the
// publication run, and the check made after it.
type Repaired struct {
	Found   *Report
	Publish *republish.Result // nil when nothing was missing
	After   *Report           // nil when nothing was published
}

// repairMaxIDs is how many missing ids per window a repair's check lists:
// each one is read back from the outbox. A window missing more is
// repaired again by the next round.
const repairMaxIDs = 100_000

// repairRounds bounds the check-and-publish rounds of one Repair.
const repairRounds = 5

// Repair checks [From, To) as Run does and publishes every event the check
// finds missing from its topic, read back from its outbox row and routed
// with the mappings as the stream would, exactly once (package republish:
// safe beside a running relay and another repair), then checks again. The
// published events carry the source's appId, their outbox id, key, type,
// payload and occurred_at, the xid of the transaction that inserted their
// row, and as commit_lsn the source's WAL insert position when they were
// read (their own commit position is not kept by PostgreSQL), with seq
// giving their order. Events the stream would have refused (their
// contract, their mapping) are not published: the run's record says why.
func Repair(ctx context.Context, dsn string, root storage.Store, opts Options, ro RepairOptions, log *slog.Logger) (*Repaired, error) {
	if log == nil {
		log = slog.Default()
	}
	opts = opts.WithDefaults()
	opts.MaxIDs = max(opts.MaxIDs, repairMaxIDs)
	found, err := Run(ctx, dsn, root, opts, log)
	if err != nil {
		return nil, err
	}
	out := &Repaired{Found: found}
	opts.From, opts.To = found.From, found.To // the re-check looks at the same windows
	rep := found
	for round := 0; round < repairRounds && missingListed(rep) > 0; round++ {
		res, err := repairOnce(ctx, dsn, root, opts, ro, rep, log)
		if res != nil {
			out.Publish = mergeRuns(out.Publish, res)
			annotate(rep, res)
		}
		if err != nil || ro.DryRun {
			return out, err
		}
		if res.Run.Republished+res.Run.Present == 0 {
			break // what is left cannot be published (refused): checking again finds the same
		}
		if rep, err = Run(ctx, dsn, root, opts, log); err != nil {
			return out, err
		}
		out.After = rep
	}
	return out, nil
}

func missingListed(rep *Report) int {
	n := 0
	for _, r := range rep.Results {
		n += len(r.Missing)
	}
	return n
}

// repairOnce reads the missing events of rep from the outbox and
// publishes them.
func repairOnce(ctx context.Context, dsn string, root storage.Store, opts Options, ro RepairOptions, rep *Report, log *slog.Logger) (*republish.Result, error) {
	var ids []string
	for _, r := range rep.Results {
		ids = append(ids, r.Missing...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	events, err := readMissing(ctx, dsn, opts, rep.AppID, ids)
	if err != nil {
		return nil, err
	}
	sel := fmt.Sprintf("reconcile run %s: %d events missing from [%s, %s)", rep.RunID, len(ids),
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339))
	if len(opts.Topics) > 0 {
		sel += " of topics " + strings.Join(opts.Topics, ", ")
	}
	return republish.Publish(ctx, republish.Options{Root: root, Contracts: ro.Contracts, Protector: ro.Protector, Log: log,
		Kind: republish.KindRepair, Actor: ro.Actor, Selection: sel, DryRun: ro.DryRun}, events)
}

// readMissing reads the outbox rows of ids, in (occurred_at, id) order,
// and routes each as the stream would. A row the source no longer holds
// (the janitor deleted it since) is left out.
func readMissing(ctx context.Context, dsn string, opts Options, appID string, ids []string) ([]republish.Event, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, set := range []string{`SET TimeZone = 'UTC'`, `SET DateStyle = 'ISO'`} {
		if _, err := conn.Exec(ctx, set); err != nil {
			return nil, fmt.Errorf("%s: %w", set, err)
		}
	}
	tables, err := outboxTables(ctx, conn, opts.Tables, opts.Publication, opts.Mappings)
	if err != nil {
		return nil, err
	}
	var walText string
	var trackCommits bool
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, current_setting('track_commit_timestamp') = 'on'`).Scan(&walText, &trackCommits); err != nil {
		return nil, fmt.Errorf("sample the WAL position: %w", err)
	}
	wal, err := pglogrepl.ParseLSN(walText)
	if err != nil {
		return nil, fmt.Errorf("parse WAL position %q: %w", walText, err)
	}
	var rows []outboxRow
	for _, t := range tables {
		got, err := readRows(ctx, conn, t, ids, trackCommits)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	slices.SortFunc(rows, func(a, b outboxRow) int {
		if c := a.occurred.Compare(b.occurred); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	rr := outbox.NewRowRouter(opts.Mappings)
	now := time.Now().UTC().Truncate(time.Microsecond)
	events := make([]republish.Event, 0, len(rows))
	for i, r := range rows {
		txn := outbox.RowTxn{CommitLSN: int64(wal), Seq: int32(i), Xid: r.xid, CommitTime: now}
		if !r.committed.IsZero() {
			txn.CommitTime = r.committed.UTC().Truncate(time.Microsecond)
		}
		ev, dl := rr.Route(r.table, r.cols, txn)
		if dl != nil {
			e := republish.Event{Event: dl.Event, Refused: dl.Reason}
			e.Source = appID
			events = append(events, e)
			continue
		}
		ev.Source = appID
		events = append(events, republish.Event{Event: *ev})
	}
	return events, nil
}

// outboxRow is one outbox row read back: its columns as text, in table
// order, the xid that inserted it and, with track_commit_timestamp on,
// that transaction's commit time.
type outboxRow struct {
	table     string
	id        string
	occurred  time.Time
	xid       int64
	committed time.Time
	cols      []outbox.RawColumn
}

// readRows reads the rows of one outbox table whose id is among ids.
func readRows(ctx context.Context, conn *pgx.Conn, t sourceTable, ids []string, trackCommits bool) ([]outboxRow, error) {
	cols, err := tableColumns(ctx, conn, t)
	if err != nil {
		return nil, err
	}
	list := make([]string, len(cols))
	for i, c := range cols {
		list[i] = pgx.Identifier{c.Name}.Sanitize() + "::text"
	}
	committed := "NULL::timestamptz"
	if trackCommits {
		committed = "pg_xact_commit_timestamp(xmin)"
	}
	q := fmt.Sprintf(`SELECT xmin::text, %s, %s::text, %s, %s FROM %s WHERE %s = ANY($1::%s[])`,
		committed, t.id, t.occurred, strings.Join(list, ", "), t.qualified, t.id, t.idType)
	rows, err := conn.Query(ctx, q, ids)
	if err != nil {
		return nil, fmt.Errorf("read the missing rows of %s: %w", t, err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var xid string
		var at *time.Time
		vals := make([]*string, len(cols))
		r := outboxRow{table: t.String()}
		dest := []any{&xid, &at, &r.id, &r.occurred}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("read the missing rows of %s: %w", t, err)
		}
		r.xid, _ = strconv.ParseInt(xid, 10, 64)
		if at != nil {
			r.committed = *at
		}
		r.cols = make([]outbox.RawColumn, len(cols))
		for i, c := range cols {
			r.cols[i] = outbox.RawColumn{Name: c.Name, Text: vals[i], TypeOID: c.TypeOID}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// column is one column of an outbox table.
type column struct {
	Name    string
	TypeOID uint32
}

func tableColumns(ctx context.Context, conn *pgx.Conn, t sourceTable) ([]column, error) {
	rows, err := conn.Query(ctx, `SELECT attname::text, atttypid::int8 FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, t.qualified)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		var oid int64
		err := r.Scan(&c.Name, &oid)
		c.TypeOID = uint32(oid)
		return c, err
	})
}

// annotate sets, on each diverged result of rep, how many of its missing
// events res published, and the run that did.
func annotate(rep *Report, res *republish.Result) {
	done := map[string]bool{}
	for _, o := range res.Outcomes {
		if o.Status == republish.Republished {
			done[o.ID] = true
		}
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		n := int64(0)
		for _, id := range r.Missing {
			if done[id] {
				n++
			}
		}
		if n > 0 {
			r.Repaired, r.RepairID = r.Repaired+n, res.Run.ID
		}
	}
}

// mergeRuns keeps the runs' outcomes together (one per round); the first
// run's record stands for them, with the counts of all.
func mergeRuns(acc, res *republish.Result) *republish.Result {
	if acc == nil {
		return res
	}
	acc.Outcomes = append(acc.Outcomes, res.Outcomes...)
	acc.Run.Events += res.Run.Events
	acc.Run.Republished += res.Run.Republished
	acc.Run.Present += res.Run.Present
	acc.Run.Refused += res.Run.Refused
	return acc
}
