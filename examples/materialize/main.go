// Command materialize is an example consumer: it materialises a DeltaBus
// topic into a PostgreSQL table, one row per event, effectively once. Each
// batch is inserted in the transaction that also moves the group's
// checkpoint (subscribe/pgcheckpoint), so a crash at any moment leaves the
// table and the checkpoint in agreement: no event missing, none twice. The
// table deliberately has no unique constraint on event_id: exactly-once
// comes from the checkpoint, and `relay check consumers --materialized
// GROUP:TABLE:event_id` would show any duplicate.
//
//	materialize --store file:///var/lib/deltabus --topic orders --group orders-table \
//	  --dsn postgres://app@db/app --table orders_events
//
// --checkpoint store keeps the checkpoint in the DeltaBus store instead:
// then a crash between the insert and the checkpoint inserts the last batch
// again (at least once), which is what the check's duplicate rate catches.
//
// Rebuilding the table while the live one keeps serving: run a second copy
// with a new group and a new table (--group orders-table-v2 --table
// orders_events_v2, --from-version 0 or a version after the last reset);
// when `relay check consumers` shows its lag at 0 and completeness 1, point
// readers at the new table (a view swap: CREATE OR REPLACE VIEW orders AS
// SELECT * FROM orders_events_v2), stop the old consumer, drop the old table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
)

type config struct {
	store, topic, group, dsn, table, checkpoint string
	batch                                       int
	poll                                        time.Duration
	follow                                      bool
	fromVersion                                 int64
}

func main() {
	var c config
	flag.StringVar(&c.store, "store", os.Getenv("DELTABUS_STORE"), "DeltaBus store URL (env DELTABUS_STORE)")
	flag.StringVar(&c.topic, "topic", "", "topic to materialise")
	flag.StringVar(&c.group, "group", "", "consumer group")
	flag.StringVar(&c.dsn, "dsn", "", "the consumer's PostgreSQL")
	flag.StringVar(&c.table, "table", "", "table to write (created if missing)")
	flag.StringVar(&c.checkpoint, "checkpoint", "postgres", "where the checkpoint lives: postgres (effectively once) or store (at least once)")
	flag.IntVar(&c.batch, "batch", 500, "events per transaction")
	flag.DurationVar(&c.poll, "poll", subscribe.DefaultPollInterval, "poll interval once caught up")
	flag.BoolVar(&c.follow, "follow", true, "keep polling once caught up")
	flag.Int64Var(&c.fromVersion, "from-version", -1, "reset the group to this version first (rebuild into a new table)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "materialize:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	if c.store == "" || c.topic == "" || c.group == "" || c.dsn == "" || c.table == "" {
		return fmt.Errorf("--store, --topic, --group, --dsn and --table are required")
	}
	store, err := storage.Open(ctx, c.store, storage.S3Options{})
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, c.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := createTable(ctx, pool, c.table); err != nil {
		return err
	}
	opts := subscribe.Options{BatchSize: c.batch, PollInterval: c.poll, Follow: c.follow,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	insert := inserter(pool, c.table)
	if c.checkpoint == "postgres" {
		if opts.Checkpoints, err = pgcheckpoint.Open(ctx, pool, ""); err != nil {
			return err
		}
	}
	if c.fromVersion >= 0 {
		if _, err := subscribe.Reset(ctx, store, opts.Checkpoints, c.topic, c.group, subscribe.FromVersion(c.fromVersion)); err != nil {
			return err
		}
	}
	return subscribe.Subscribe(ctx, store, c.topic, c.group, insert, opts)
}

// createTable creates the materialised table: one row per event, id in
// insertion order.
func createTable(ctx context.Context, pool *pgxpool.Pool, table string) error {
	t := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
  id bigserial PRIMARY KEY, event_id text NOT NULL, key text NOT NULL, type text NOT NULL,
  schema_version int NOT NULL, payload jsonb NOT NULL, headers jsonb, occurred_at timestamptz,
  commit_lsn bigint NOT NULL, seq int NOT NULL, version bigint NOT NULL, event_offset bigint NOT NULL);
CREATE INDEX IF NOT EXISTS `+pgx.Identifier{strings.ReplaceAll(table, ".", "_") + "_event_id"}.Sanitize()+` ON `+t+` (event_id)`)
	if err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return nil
}

var columns = []string{"event_id", "key", "type", "schema_version", "payload", "headers", "occurred_at", "commit_lsn", "seq", "version", "event_offset"}

// inserter returns the handler: COPY the batch into the table, in the
// checkpoint's transaction when there is one, else in its own.
func inserter(pool *pgxpool.Pool, table string) subscribe.Handler {
	ident := pgx.Identifier(strings.Split(table, "."))
	return func(ctx context.Context, b *subscribe.Batch) error {
		rows := make([][]any, len(b.Events))
		for i, e := range b.Events {
			var headers any
			if e.Headers != nil {
				headers = json.RawMessage(*e.Headers)
			}
			rows[i] = []any{e.ID, e.Key, e.Type, e.SchemaVersion, json.RawMessage(e.Payload), headers, e.OccurredAt, e.CommitLSN, e.Seq, e.Version, e.Offset}
		}
		copyIn := func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, ident, columns, pgx.CopyFromRows(rows))
			return err
		}
		if b.Tx != nil {
			return copyIn(b.Tx)
		}
		return pgx.BeginFunc(ctx, pool, copyIn)
	}
}
