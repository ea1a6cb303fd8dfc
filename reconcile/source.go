package reconcile

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
)

// sourceTable is one outbox table with the quoted names of the columns the
// reconciler reads.
type sourceTable struct {
	Table
	qualified, id, topic, occurred string
	idType                         string // SQL type of the id column, e.g. uuid
}

// PublicationTables lists the tables of a publication.
func PublicationTables(ctx context.Context, conn *pgx.Conn, publication string) ([]Table, error) {
	rows, err := conn.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY 1, 2`, publication)
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %q: %w", publication, err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) {
		var t Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %q: %w", publication, err)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("publication %q has no tables (or does not exist); name the outbox tables with --table", publication)
	}
	return tables, nil
}

// resolveTables maps each table to its column names and id type.
func resolveTables(ctx context.Context, conn *pgx.Conn, tables []Table, ms outbox.Mappings) ([]sourceTable, error) {
	out := make([]sourceTable, 0, len(tables))
	for _, t := range tables {
		m := ms.For(t.Schema, t.Name)
		if m.OccurredAt == "" {
			return nil, fmt.Errorf("outbox table %s has no occurred_at column in its mapping (%s): the reconciler windows rows by occurred_at", t, m)
		}
		st := sourceTable{
			Table:     t,
			qualified: pgx.Identifier{t.Schema, t.Name}.Sanitize(),
			id:        pgx.Identifier{m.ID}.Sanitize(),
			topic:     pgx.Identifier{m.Topic}.Sanitize(),
			occurred:  pgx.Identifier{m.OccurredAt}.Sanitize(),
		}
		err := conn.QueryRow(ctx, `SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
			WHERE a.attrelid = $1::regclass AND a.attname = $2 AND NOT a.attisdropped`, st.qualified, m.ID).Scan(&st.idType)
		if err != nil {
			return nil, fmt.Errorf("outbox table %s: read type of id column %q: %w", t, m.ID, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// source runs every source query inside one REPEATABLE READ snapshot.
type source struct {
	tx     pgx.Tx
	tables []sourceTable
}

// bucketCounts counts rows per topic and window; bounds are the window
// edges (len(windows)+1, ascending). Topics restricts when non-empty.
func (s *source) bucketCounts(ctx context.Context, bounds []time.Time, topics []string) (map[string][]int64, error) {
	out := map[string][]int64{}
	n := len(bounds) - 1
	for _, t := range s.tables {
		q := fmt.Sprintf(`SELECT %[1]s::text, width_bucket(%[2]s, $1::timestamptz[]), count(*) FROM %[3]s
			WHERE %[2]s >= $2 AND %[2]s < $3 AND ($4::text[] IS NULL OR %[1]s::text = ANY($4)) GROUP BY 1, 2`,
			t.topic, t.occurred, t.qualified)
		var filter []string
		if len(topics) > 0 {
			filter = topics
		}
		rows, err := s.tx.Query(ctx, q, bounds, bounds[0], bounds[n], filter)
		if err != nil {
			return nil, fmt.Errorf("count rows of %s per topic and window: %w", t, err)
		}
		var topic string
		var b int
		var c int64
		_, err = pgx.ForEachRow(rows, []any{&topic, &b, &c}, func() error {
			if b < 1 || b > n {
				return fmt.Errorf("row bucket %d outside 1..%d", b, n)
			}
			if out[topic] == nil {
				out[topic] = make([]int64, n)
			}
			out[topic][b-1] += c
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("count rows of %s per topic and window: %w", t, err)
		}
	}
	return out, nil
}

// count counts the topic's rows in w over the (topic, occurred_at) index.
func (s *source) count(ctx context.Context, topic string, w Window) (int64, error) {
	var total int64
	for _, t := range s.tables {
		var c int64
		q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s = $1 AND %s >= $2 AND %[3]s < $3`, t.qualified, t.topic, t.occurred)
		if err := s.tx.QueryRow(ctx, q, topic, w.Start, w.End).Scan(&c); err != nil {
			return 0, fmt.Errorf("count rows of %s topic %q in %s: %w", t, topic, w, err)
		}
		total += c
	}
	return total, nil
}

// ids returns the topic's row ids in w, sorted.
func (s *source) ids(ctx context.Context, topic string, w Window) ([]string, error) {
	var out []string
	for _, t := range s.tables {
		q := fmt.Sprintf(`SELECT %s::text FROM %s WHERE %s = $1 AND %s >= $2 AND %[4]s < $3`, t.id, t.qualified, t.topic, t.occurred)
		rows, err := s.tx.Query(ctx, q, topic, w.Start, w.End)
		if err != nil {
			return nil, fmt.Errorf("read ids of %s topic %q in %s: %w", t, topic, w, err)
		}
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { out = append(out, id); return nil }); err != nil {
			return nil, fmt.Errorf("read ids of %s topic %q in %s: %w", t, topic, w, err)
		}
	}
	sort.Strings(out)
	return out, nil
}

// lookup returns which of ids exist in the source now (outside the
// snapshot), for telling late commits from unexpected events.
func lookup(ctx context.Context, conn *pgx.Conn, tables []sourceTable, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	for _, t := range tables {
		q := fmt.Sprintf(`SELECT %[1]s::text FROM %[2]s WHERE %[1]s = ANY($1::text[]::%[3]s[])`, t.id, t.qualified, t.idType)
		rows, err := conn.Query(ctx, q, ids)
		if err != nil {
			return nil, fmt.Errorf("look ids up in %s: %w", t, err)
		}
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { found[id] = true; return nil }); err != nil {
			return nil, fmt.Errorf("look ids up in %s: %w", t, err)
		}
	}
	return found, nil
}
