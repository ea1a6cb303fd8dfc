package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deltabus/deltabus/outbox"
	"github.com/jackc/pgx/v5"
)

// querier is what both *pgx.Conn and pgx.Tx offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var errNoPublication = errors.New("publication does not exist")

type publication struct {
	allTables bool
	insert    bool
}

func lookupPublication(ctx context.Context, q querier, name string) (publication, error) {
	var p publication
	err := q.QueryRow(ctx, "SELECT puballtables, pubinsert FROM pg_publication WHERE pubname = $1", name).Scan(&p.allTables, &p.insert)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, errNoPublication
	}
	if err != nil {
		return p, fmt.Errorf("look up publication %s: %w", name, err)
	}
	return p, nil
}

// tableColumns returns the live column names of schema.table; exists is
// false when there is no such table.
func tableColumns(ctx context.Context, q querier, schema, table string) (cols []string, exists bool, err error) {
	err = q.QueryRow(ctx, `SELECT c.oid IS NOT NULL, coalesce(array_agg(a.attname::text ORDER BY a.attnum)
			FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped), '{}')
		FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE s.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
		GROUP BY c.oid`, schema, table).Scan(&exists, &cols)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read columns of %s.%s: %w", schema, table, err)
	}
	return cols, exists, nil
}

// missingColumns returns the mapped columns of m absent from cols.
func missingColumns(cols []string, m outbox.Mapping) []string {
	var missing []string
	for _, fc := range m.Required() {
		if !slices.Contains(cols, fc[1]) && !slices.Contains(missing, fc[1]) {
			missing = append(missing, fc[1])
		}
	}
	return missing
}

// describeMissing renders `missing column "topic"`, adding the others as
// `missing column "topic" (also missing: "type", "payload")`.
func describeMissing(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = fmt.Sprintf("%q", c)
	}
	s := "missing column " + q[0]
	if len(q) > 1 {
		s += " (also missing: " + strings.Join(q[1:], ", ") + ")"
	}
	return s
}

// Check is the relay's preflight: the server is PostgreSQL MinMajor or
// later and runs with wal_level = logical, the publication exists, publishes INSERTs and includes at least
// one table, and every table it includes is an outbox under its mapping
// (has the mapped columns, publishes all of them, filters no rows). Each
// problem is reported in one line that says how to fix it; several
// problematic tables give one line each.
func Check(ctx context.Context, conn *pgx.Conn, opts Options) error {
	if err := CheckServerVersion(ctx, conn); err != nil {
		return err
	}
	if err := checkWALLevel(ctx, conn); err != nil {
		return err
	}
	return CheckPublication(ctx, conn, opts)
}

// CheckPublication is Check without the server version and wal_level
// checks, for a caller that makes them on its own (the relay's preflight,
// relay doctor): the publication and every table it includes.
func CheckPublication(ctx context.Context, conn *pgx.Conn, opts Options) error {
	opts = opts.withDefaults()
	version, err := serverVersionNum(ctx, conn)
	if err != nil {
		return err
	}
	pub, err := lookupPublication(ctx, conn, opts.Publication)
	if errors.Is(err, errNoPublication) {
		return fmt.Errorf(`publication %s does not exist; run "relay migrate" to create it`, opts.Publication)
	}
	if err != nil {
		return err
	}
	if !pub.insert {
		return fmt.Errorf("publication %s does not publish INSERTs; run ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			opts.Publication, pgx.Identifier{opts.Publication}.Sanitize())
	}
	tables, err := publishedTables(ctx, conn, opts.Publication, version)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return fmt.Errorf(`publication %s includes no tables; run "relay migrate" to add the outbox table`, opts.Publication)
	}
	var errs []error
	for _, t := range tables {
		if err := checkTable(ctx, conn, opts, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkWALLevel(ctx context.Context, q querier) error {
	var level string
	if err := q.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("wal_level is %q; set wal_level = logical in postgresql.conf and restart PostgreSQL", level)
	}
	return nil
}

// publishedTable is one row of pg_publication_tables.
type publishedTable struct {
	schema, name string
	columns      []string // the publication's column list; nil when it publishes all columns
	rowFilter    *string  // the publication's WHERE clause, if any
}

func (t publishedTable) qualified() string { return t.schema + "." + t.name }

// publishedTables lists pub's tables; v is the server's version number
// (server_version_num).
func publishedTables(ctx context.Context, q querier, pub string, v int) ([]publishedTable, error) {
	sql := `SELECT schemaname, tablename, NULL::text[], NULL::text FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY 1, 2`
	if v >= 150000 { // column lists and row filters came in PostgreSQL 15
		sql = `SELECT schemaname, tablename, attnames, rowfilter FROM pg_publication_tables
			WHERE pubname = $1 ORDER BY 1, 2`
	}
	rows, err := q.Query(ctx, sql, pub)
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %s: %w", pub, err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (publishedTable, error) {
		var t publishedTable
		err := r.Scan(&t.schema, &t.name, &t.columns, &t.rowFilter)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %s: %w", pub, err)
	}
	return tables, nil
}

// checkTable checks that one published table is an outbox.
func checkTable(ctx context.Context, q querier, o Options, t publishedTable) error {
	m := o.Mappings.For(t.schema, t.name)
	cols, _, err := tableColumns(ctx, q, t.schema, t.name)
	if err != nil {
		return err
	}
	if missing := missingColumns(cols, m); len(missing) > 0 {
		return fmt.Errorf("table %s in publication %s is not a DeltaBus outbox: %s; remove it from the publication or map its columns",
			t.qualified(), o.Publication, describeMissing(missing))
	}
	if t.columns != nil {
		if unpublished := missingColumns(t.columns, m); len(unpublished) > 0 {
			return fmt.Errorf("publication %s publishes a column list of %s without %q; publish all its columns",
				o.Publication, t.qualified(), unpublished[0])
		}
	}
	var canRead bool
	var role string
	err = q.QueryRow(ctx, `SELECT has_table_privilege(format('%I.%I', $1::text, $2::text), 'SELECT'), current_user`, t.schema, t.name).Scan(&canRead, &role)
	if err != nil {
		return fmt.Errorf("check privileges on %s: %w", t.qualified(), err)
	}
	if !canRead {
		return fmt.Errorf("role %s cannot read table %s (a first start copies its rows): run GRANT SELECT ON %s TO %s",
			role, t.qualified(), pgx.Identifier{t.schema, t.name}.Sanitize(), pgx.Identifier{role}.Sanitize())
	}
	if t.rowFilter != nil {
		return fmt.Errorf("publication %s filters the rows of %s (WHERE %s): the relay would never see the other events; publish the table without a row filter",
			o.Publication, t.qualified(), *t.rowFilter)
	}
	return nil
}
