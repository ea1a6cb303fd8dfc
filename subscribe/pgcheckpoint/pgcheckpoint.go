// Package pgcheckpoint keeps subscription checkpoints in the consumer's own
// PostgreSQL, in a table it creates, and commits each checkpoint in the
// same transaction as the handler's state change: a batch's effects and the
// position after it commit together or not at all, so a consumer that
// crashes anywhere resumes exactly where its state stops (effectively
// once). A second consumer of the same group cannot double-apply a batch:
// Commit locks the checkpoint row and checks it is still the one the batch
// started from.
//
// The table (DDL, with DefaultTable as the name):
//
//	CREATE TABLE IF NOT EXISTS deltabus_consumer_checkpoints (
//	  consumer_group text NOT NULL,
//	  topic          text NOT NULL,
//	  version        bigint NOT NULL CHECK (version >= 0),
//	  event_offset   bigint NOT NULL CHECK (event_offset >= 0),
//	  table_id       text NOT NULL DEFAULT '',
//	  updated_at     timestamptz NOT NULL DEFAULT now(),
//	  PRIMARY KEY (consumer_group, topic));
//
// (version, event_offset) is the next event to deliver (subscribe.Position);
// table_id the Delta table id the position refers to.
package pgcheckpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/subscribe"
)

// DefaultTable is the checkpoint table's name when Open gets "".
const DefaultTable = "deltabus_consumer_checkpoints"

// DDL returns the CREATE TABLE statement for table (schema-qualified or
// not, quoted as identifiers).
func DDL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + quoteTable(table) + ` (
  consumer_group text NOT NULL,
  topic          text NOT NULL,
  version        bigint NOT NULL CHECK (version >= 0),
  event_offset   bigint NOT NULL CHECK (event_offset >= 0),
  table_id       text NOT NULL DEFAULT '',
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_group, topic))`
}

func quoteTable(table string) string {
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// DB is what the store needs of a connection: *pgx.Conn and *pgxpool.Pool
// both have it. A *pgx.Conn must not be used by anyone else meanwhile.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Store is a subscribe.Checkpoints in PostgreSQL.
type Store struct {
	db    DB
	name  string // as given
	table string // quoted
}

var _ subscribe.Checkpoints = (*Store)(nil)

// Open returns the store on table ("" = DefaultTable), creating the table
// when it does not exist.
func Open(ctx context.Context, db DB, table string) (*Store, error) {
	s := New(db, table)
	if _, err := db.Exec(ctx, DDL(s.name)); err != nil {
		return nil, fmt.Errorf("create checkpoint table %s: %w", s.name, err)
	}
	return s, nil
}

// New returns the store on an existing table ("" = DefaultTable).
func New(db DB, table string) *Store {
	if table == "" {
		table = DefaultTable
	}
	return &Store{db: db, name: table, table: quoteTable(table)}
}

// Exists reports whether the store's table exists.
func (s *Store) Exists(ctx context.Context) (bool, error) {
	rows, err := s.db.Query(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.table)
	if err != nil {
		return false, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
}

// Load implements subscribe.Checkpoints.
func (s *Store) Load(ctx context.Context, group, topic string) (subscribe.Checkpoint, bool, error) {
	cs, err := s.query(ctx, s.db, ` WHERE consumer_group = $1 AND topic = $2`, group, topic)
	if err != nil || len(cs) == 0 {
		return subscribe.Checkpoint{}, false, err
	}
	return cs[0], true, nil
}

// List implements subscribe.Checkpoints.
func (s *Store) List(ctx context.Context) ([]subscribe.Checkpoint, error) {
	return s.query(ctx, s.db, ` ORDER BY consumer_group COLLATE "C", topic COLLATE "C"`)
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) query(ctx context.Context, q querier, where string, args ...any) ([]subscribe.Checkpoint, error) {
	rows, err := q.Query(ctx, `SELECT consumer_group, topic, version, event_offset, table_id, updated_at FROM `+s.table+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints from %s: %w", s.table, err)
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (subscribe.Checkpoint, error) {
		var c subscribe.Checkpoint
		err := r.Scan(&c.Group, &c.Topic, &c.Version, &c.Offset, &c.TableID, &c.UpdatedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read checkpoints from %s: %w", s.table, err)
	}
	return cs, nil
}

// Commit implements subscribe.Checkpoints in one transaction: lock and
// compare the stored checkpoint, run apply with the transaction, write
// next, commit. An error from COMMIT leaves the outcome unknown: Load tells
// which (the checkpoint moved with the state, or neither did).
func (s *Store) Commit(ctx context.Context, prev *subscribe.Checkpoint, next subscribe.Checkpoint, apply func(context.Context, pgx.Tx) error) error {
	if _, err := subscribe.CheckpointKey(next.Group, next.Topic); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := s.query(ctx, tx, ` WHERE consumer_group = $1 AND topic = $2 FOR UPDATE`, next.Group, next.Topic)
		if err != nil {
			return err
		}
		if !same(cur, prev) {
			return fmt.Errorf("commit checkpoint of group %q in topic %q: %w", next.Group, next.Topic, subscribe.ErrCheckpointMoved)
		}
		if apply != nil {
			if err := apply(ctx, tx); err != nil {
				return err
			}
		}
		return s.write(ctx, tx, prev == nil, next)
	})
}

func same(cur []subscribe.Checkpoint, prev *subscribe.Checkpoint) bool {
	if len(cur) == 0 || prev == nil {
		return len(cur) == 0 && prev == nil
	}
	return cur[0].Position == prev.Position && cur[0].TableID == prev.TableID
}

// write inserts the first checkpoint (a concurrent first insert fails on
// the primary key: ErrCheckpointMoved) or updates the locked row.
func (s *Store) write(ctx context.Context, tx pgx.Tx, first bool, c subscribe.Checkpoint) error {
	sql := `UPDATE ` + s.table + ` SET version = $3, event_offset = $4, table_id = $5, updated_at = now()
		WHERE consumer_group = $1 AND topic = $2`
	if first {
		sql = `INSERT INTO ` + s.table + ` (consumer_group, topic, version, event_offset, table_id) VALUES ($1, $2, $3, $4, $5)`
	}
	_, err := tx.Exec(ctx, sql, c.Group, c.Topic, c.Version, c.Offset, c.TableID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("commit checkpoint of group %q in topic %q: %w", c.Group, c.Topic, subscribe.ErrCheckpointMoved)
	}
	if err != nil {
		return fmt.Errorf("write checkpoint of group %q in topic %q: %w", c.Group, c.Topic, err)
	}
	return nil
}
