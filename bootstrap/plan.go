package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
)

// source is one published outbox table as the snapshot reads it.
type source struct {
	rel      *decoding.Relation // every column, in attnum order, as the stream announces it
	mapping  outbox.Mapping
	selectSQ string // SELECT <all columns> FROM <table>
	topicCol string // quoted topic column
	orderBy  string // ORDER BY clause giving the snapshot order within a topic
	estRows  int64  // pg_class.reltuples, for progress only
	// indexed: an index leads with the topic column, so a topic's rows are
	// read through it in (occurred_at, id) order without a sort.
	indexed bool
	// kinds, when every column has a type read in binary, says how to read
	// each; nil means the table is copied in text format.
	kinds []binKind
	fast  *fastPlan // nil: every row is converted to text and routed
}

// unit is the work one connection reads in one go. A range unit (rng set;
// the first start) is a block range of one table, every topic's rows in
// physical order. A topic unit (a rebuild) is one topic value's rows in
// every published table, in table order and, within a table, in
// (occurred_at, id) order.
type unit struct {
	index int
	topic *string // topic unit: raw topic value; nil = rows whose topic is NULL
	parts []*source
	rng   *blockRange
}

func (u *unit) label() string {
	switch {
	case u.rng != nil:
		return u.parts[0].qualified() + " " + u.rng.String()
	case u.topic == nil:
		return "<NULL topic>"
	}
	return *u.topic
}

// tablesQuery lists the publication's tables with a row estimate for
// progress: the statistics' density (reltuples / relpages) scaled to the
// table's current size, as the planner does; -1 when the table was never
// analyzed or vacuumed (estimateRows then samples it).
const tablesQuery = `
	SELECT c.oid, n.nspname, c.relname,
	       CASE WHEN c.reltuples >= 0 AND c.relpages > 0
	            THEN (c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::int))::bigint
	            ELSE -1 END
	FROM pg_publication_tables p
	JOIN pg_namespace n ON n.nspname = p.schemaname
	JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
	WHERE p.pubname = $1 ORDER BY 2, 3`

// publishedSources lists the tables of the publication with their columns.
func publishedSources(ctx context.Context, conn *pgx.Conn, pub string, ms outbox.Mappings) ([]*source, error) {
	var iso bool
	var tz string
	err := conn.QueryRow(ctx, "SELECT current_setting('DateStyle') LIKE 'ISO%', lower(current_setting('TimeZone'))").Scan(&iso, &tz)
	if err != nil {
		return nil, fmt.Errorf("read DateStyle and TimeZone: %w", err)
	}
	utc := utcZones[tz]
	rows, err := conn.Query(ctx, tablesQuery, pub)
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %q: %w", pub, err)
	}
	var srcs []*source
	for rows.Next() {
		s := &source{rel: &decoding.Relation{}}
		var oid uint32
		if err := rows.Scan(&oid, &s.rel.Namespace, &s.rel.Name, &s.estRows); err != nil {
			return nil, fmt.Errorf("list tables of publication %q: %w", pub, err)
		}
		s.rel.ID = oid
		srcs = append(srcs, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables of publication %q: %w", pub, err)
	}
	for _, s := range srcs {
		if err := s.describe(ctx, conn, ms); err != nil {
			return nil, err
		}
		s.chooseFormat(iso, utc)
		if s.estRows < 0 {
			if s.estRows, err = s.estimateRows(ctx, conn); err != nil {
				return nil, err
			}
		}
	}
	return srcs, nil
}

// estimateRows estimates the rows of a table without statistics (never
// analyzed: its progress would read "100%" from the start) from its size
// and the width of its first rows: pages × usable page bytes / (row width
// + tuple header and line pointer).
func (s *source) estimateRows(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var pages, sampled int64
	var width float64
	err := conn.QueryRow(ctx, `SELECT pg_relation_size($1::oid) / current_setting('block_size')::int,
		count(*), coalesce(avg(pg_column_size(t.*)), 0)
		FROM (SELECT * FROM `+pgx.Identifier{s.rel.Namespace, s.rel.Name}.Sanitize()+` LIMIT 1000) t`, s.rel.ID).Scan(&pages, &sampled, &width)
	if err != nil {
		return 0, fmt.Errorf("estimate rows of %s: %w", s.qualified(), err)
	}
	if sampled == 0 {
		return 0, nil
	}
	return max(sampled, int64(float64(pages)*8168/(width+28))), nil
}

func (s *source) qualified() string { return s.rel.Namespace + "." + s.rel.Name }

// describe reads the table's columns and builds its queries.
func (s *source) describe(ctx context.Context, conn *pgx.Conn, ms outbox.Mappings) error {
	rows, err := conn.Query(ctx, `
		SELECT attname, atttypid, atttypmod FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, s.rel.ID)
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", s.qualified(), err)
	}
	var cols []string
	for rows.Next() {
		var c decoding.Column
		if err := rows.Scan(&c.Name, &c.TypeOID, &c.TypeMod); err != nil {
			return fmt.Errorf("read columns of %s: %w", s.qualified(), err)
		}
		s.rel.Columns = append(s.rel.Columns, c)
		cols = append(cols, pgx.Identifier{c.Name}.Sanitize())
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read columns of %s: %w", s.qualified(), err)
	}
	s.mapping = ms.For(s.rel.Namespace, s.rel.Name)
	if s.mapping.IsZero() {
		s.mapping = outbox.DeltaBusMapping()
	}
	if err := s.mapping.Validate(); err != nil {
		return fmt.Errorf("table %s: %w", s.qualified(), err)
	}
	s.selectSQ = "SELECT " + strings.Join(cols, ", ") + " FROM " + pgx.Identifier{s.rel.Namespace, s.rel.Name}.Sanitize()
	s.topicCol = pgx.Identifier{s.mapping.Topic}.Sanitize()
	id := pgx.Identifier{s.mapping.ID}.Sanitize()
	s.orderBy = " ORDER BY " + id
	if s.mapping.OccurredAt != "" && s.hasColumn(s.mapping.OccurredAt) {
		s.orderBy = " ORDER BY " + pgx.Identifier{s.mapping.OccurredAt}.Sanitize() + ", " + id
	}
	return nil
}

// chooseFormat reads the table in binary when every column has a type
// whose text output can be rebuilt exactly (timestamps only under
// DateStyle ISO, timestamptz only when the session shows UTC).
func (s *source) chooseFormat(iso, utc bool) {
	kinds := make([]binKind, len(s.rel.Columns))
	for i, c := range s.rel.Columns {
		kinds[i] = binKindOf(c.TypeOID, utc)
		if k := kinds[i]; k == binUnsupported || !iso && (k == binTimestamp || k == binTimestamptz) {
			return
		}
	}
	s.kinds = kinds
	s.fast = newFastPlan(s.rel, kinds, s.mapping)
}

func (s *source) hasColumn(name string) bool {
	for _, c := range s.rel.Columns {
		if c.Name == name {
			return true
		}
	}
	return false
}

// topicValues returns the distinct topic values the snapshot sees in the
// table, sorted, plus whether some rows have a NULL topic. With an index
// led by the topic column it walks the index (one probe per value);
// otherwise one DISTINCT scan.
func (s *source) topicValues(ctx context.Context, conn *pgx.Conn) ([]string, bool, error) {
	err := conn.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		               WHERE i.indrelid = $1 AND a.attname = $2 AND i.indpred IS NULL)`, s.rel.ID, s.mapping.Topic).Scan(&s.indexed)
	if err != nil {
		return nil, false, fmt.Errorf("inspect indexes of %s: %w", s.qualified(), err)
	}
	tbl := pgx.Identifier{s.rel.Namespace, s.rel.Name}.Sanitize()
	col := s.topicCol
	q := "SELECT DISTINCT " + col + "::text FROM " + tbl + " WHERE " + col + " IS NOT NULL ORDER BY 1"
	if s.indexed {
		q = `WITH RECURSIVE t(v) AS (
			(SELECT ` + col + ` FROM ` + tbl + ` WHERE ` + col + ` IS NOT NULL ORDER BY 1 LIMIT 1)
			UNION ALL
			SELECT (SELECT ` + col + ` FROM ` + tbl + ` WHERE ` + col + ` > t.v ORDER BY 1 LIMIT 1) FROM t WHERE t.v IS NOT NULL)
			SELECT v::text FROM t WHERE v IS NOT NULL`
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, false, fmt.Errorf("list topics of %s: %w", s.qualified(), err)
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("list topics of %s: %w", s.qualified(), err)
	}
	var hasNull bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+tbl+" WHERE "+col+" IS NULL)").Scan(&hasNull)
	if err != nil {
		return nil, false, fmt.Errorf("look for NULL topics in %s: %w", s.qualified(), err)
	}
	return vals, hasNull, nil
}

// planUnits groups the tables' rows by topic value, in topic order (NULL
// last); within a unit the tables keep publication order.
func planUnits(ctx context.Context, conn *pgx.Conn, srcs []*source) ([]*unit, error) {
	byTopic := map[string]*unit{}
	var order []string
	var nulls *unit
	for _, s := range srcs {
		vals, hasNull, err := s.topicValues(ctx, conn)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			u := byTopic[v]
			if u == nil {
				v := v
				u = &unit{topic: &v}
				byTopic[v] = u
				order = append(order, v)
			}
			u.parts = append(u.parts, s)
		}
		if hasNull {
			if nulls == nil {
				nulls = &unit{}
			}
			nulls.parts = append(nulls.parts, s)
		}
	}
	slices.Sort(order)
	units := make([]*unit, 0, len(order)+1)
	for _, v := range order {
		units = append(units, byTopic[v])
	}
	if nulls != nil {
		units = append(units, nulls)
	}
	for i, u := range units {
		u.index = i
	}
	return units, nil
}

// copySQL is the COPY statement reading one table's share of a unit.
func (u *unit) copySQL(s *source) string {
	where, order := s.topicCol+" IS NULL", s.orderBy
	switch {
	case u.rng != nil:
		where, order = u.rng.where(), ""
	case u.topic != nil:
		where = s.topicCol + " = " + quoteLiteral(*u.topic)
	}
	format := ""
	if s.kinds != nil {
		format = " (FORMAT binary)"
	}
	return "COPY (" + s.selectSQ + " WHERE " + where + order + ") TO STDOUT" + format
}

// quoteLiteral quotes s as an escape string constant, which means the same
// whatever standard_conforming_strings says.
func quoteLiteral(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `'`, `''`)
	return "E'" + s + "'"
}
