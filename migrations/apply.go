package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/outbox"
	"github.com/jackc/pgx/v5"
)

// lockKey is the pg_advisory_xact_lock key that serialises concurrent
// Apply calls on one database ("deltabus" in ASCII).
const lockKey int64 = 0x64656c746162_7573

// Apply creates what is missing of the outbox schema, table, index, replica
// identity and publication, in one transaction under an advisory lock, and
// reports each object it looked at. It is idempotent: a second run changes
// nothing and says so; concurrent runs wait for each other.
//
// An existing table is not altered beyond its replica identity: Apply
// fails, changing nothing, if it lacks a mapped column, and it creates a
// missing table only in the DeltaBus layout. An existing publication gets
// the table added to it (several outbox tables can share one publication);
// Apply fails if that publication does not publish INSERTs.
//
// The index is built with plain CREATE INDEX, which blocks writes to an
// existing, large table while it builds.
func Apply(ctx context.Context, conn *pgx.Conn, opts Options) (Report, error) {
	opts = opts.withDefaults()
	m := opts.Mappings.For(opts.Schema, opts.Table)
	if err := m.Validate(); err != nil {
		return Report{}, fmt.Errorf("migrate %s: %w", opts.qualified(), err)
	}
	var rep Report
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := checkServerVersion(ctx, tx); err != nil {
			return err
		}
		n := namesFor(opts, m)
		for _, step := range []func(context.Context, pgx.Tx, Options, outbox.Mapping, sqlNames, *Report) error{
			ensureSchema, ensureTable, ensureIndex, ensureReplicaIdentity, ensurePublication,
		} {
			if err := step(ctx, tx, opts, m, n, &rep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("migrate %s: %w", opts.qualified(), err)
	}
	return rep, nil
}

// exec renders a SQL file and runs it.
func exec(ctx context.Context, tx pgx.Tx, file string, n sqlNames) error {
	sql, err := render(file, n)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("run %s: %w", file, err)
	}
	return nil
}

func ensureSchema(ctx context.Context, tx pgx.Tx, o Options, _ outbox.Mapping, n sqlNames, rep *Report) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", o.Schema).Scan(&exists); err != nil {
		return fmt.Errorf("look up schema %s: %w", o.Schema, err)
	}
	if exists {
		rep.add(false, "schema %s already exists", o.Schema)
		return nil
	}
	if err := exec(ctx, tx, "create_schema.sql", n); err != nil {
		return err
	}
	rep.add(true, "created schema %s", o.Schema)
	return nil
}

func ensureTable(ctx context.Context, tx pgx.Tx, o Options, m outbox.Mapping, n sqlNames, rep *Report) error {
	cols, exists, err := tableColumns(ctx, tx, o.Schema, o.Table)
	if err != nil {
		return err
	}
	if exists {
		if missing := missingColumns(cols, m); len(missing) > 0 {
			return fmt.Errorf("table %s exists but is not a DeltaBus outbox: %s; add the columns or map them",
				o.qualified(), describeMissing(missing))
		}
		rep.add(false, "table %s already exists", o.qualified())
		return nil
	}
	if m != outbox.DeltaBusMapping() {
		return fmt.Errorf("table %s does not exist, and Apply creates only the DeltaBus layout, not the mapping %s; create the table yourself",
			o.qualified(), m)
	}
	if err := exec(ctx, tx, "create_table.sql", n); err != nil {
		return err
	}
	rep.add(true, "created table %s", o.qualified())
	return nil
}

func ensureIndex(ctx context.Context, tx pgx.Tx, o Options, m outbox.Mapping, n sqlNames, rep *Report) error {
	name := indexName(o.Table, m)
	var exists bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relname = $2)`, o.Schema, name).Scan(&exists)
	if err != nil {
		return fmt.Errorf("look up index %s.%s: %w", o.Schema, name, err)
	}
	if exists {
		rep.add(false, "index %s.%s already exists", o.Schema, name)
		return nil
	}
	if err := exec(ctx, tx, "create_index.sql", n); err != nil {
		return err
	}
	cols := m.Topic
	if m.OccurredAt != "" {
		cols += ", " + m.OccurredAt
	}
	rep.add(true, "created index %s.%s on %s (%s)", o.Schema, name, o.qualified(), cols)
	return nil
}

func ensureReplicaIdentity(ctx context.Context, tx pgx.Tx, o Options, _ outbox.Mapping, n sqlNames, rep *Report) error {
	var ident string
	err := tx.QueryRow(ctx, `SELECT c.relreplident::text FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relname = $2`, o.Schema, o.Table).Scan(&ident)
	if err != nil {
		return fmt.Errorf("read replica identity of %s: %w", o.qualified(), err)
	}
	if ident == "d" {
		rep.add(false, "table %s already has replica identity default", o.qualified())
		return nil
	}
	if err := exec(ctx, tx, "replica_identity.sql", n); err != nil {
		return err
	}
	rep.add(true, "set replica identity default on %s (was %s)", o.qualified(), replIdentName(ident))
	return nil
}

func replIdentName(c string) string {
	switch c {
	case "n":
		return "nothing"
	case "f":
		return "full"
	case "i":
		return "index"
	}
	return c
}

func ensurePublication(ctx context.Context, tx pgx.Tx, o Options, _ outbox.Mapping, n sqlNames, rep *Report) error {
	pub, err := lookupPublication(ctx, tx, o.Publication)
	if errors.Is(err, errNoPublication) {
		if err := exec(ctx, tx, "create_publication.sql", n); err != nil {
			return err
		}
		rep.add(true, "created publication %s for table %s", o.Publication, o.qualified())
		return nil
	}
	if err != nil {
		return err
	}
	if !pub.insert {
		return fmt.Errorf("publication %s does not publish INSERTs; run ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			o.Publication, n.Publication)
	}
	var included bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_tables
		WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)`, o.Publication, o.Schema, o.Table).Scan(&included)
	if err != nil {
		return fmt.Errorf("look up publication %s tables: %w", o.Publication, err)
	}
	if included {
		rep.add(false, "publication %s already includes %s", o.Publication, o.qualified())
		return nil
	}
	if err := exec(ctx, tx, "add_to_publication.sql", n); err != nil {
		return err
	}
	rep.add(true, "added %s to publication %s", o.qualified(), o.Publication)
	return nil
}
