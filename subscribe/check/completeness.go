package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/subscribe"
)

// Completeness compares the closed periods of a topic with a group's table.
type Completeness struct {
	Table  string    `json:"table"`
	Column string    `json:"column"`
	Field  string    `json:"field"`
	From   time.Time `json:"from"` // closed periods checked: [From, To)
	To     time.Time `json:"to"`

	Expected      int64    `json:"expected"`       // distinct business keys of the topic's events in the periods
	Found         int64    `json:"found"`          // of those, present in the table
	Missing       int64    `json:"missing"`        // Expected - Found
	Ratio         float64  `json:"ratio"`          // Found / Expected (1 when nothing is expected)
	Rows          int64    `json:"rows"`           // table rows holding those keys
	Duplicates    int64    `json:"duplicates"`     // Rows - Found
	DuplicateRate float64  `json:"duplicate_rate"` // Duplicates / Rows
	MissingSample []string `json:"missing_sample,omitempty"`
	WorstPeriod   string   `json:"worst_period,omitempty"` // start of the least complete period
}

// keyChunk bounds the keys held and sent per query.
const keyChunk = 5000

// counter accumulates one table's counts over chunks of keys.
type counter struct {
	conn    *pgx.Conn
	table   string // quoted
	column  string // quoted
	typ     string // the column's type, from the catalog
	c       *Completeness
	periods map[time.Time]*[2]int64 // expected, found per period
}

func completeness(ctx context.Context, cfg Config, ts *topicState, cp subscribe.Checkpoint, m Materialized, dsn string) (*Completeness, error) {
	if dsn == "" {
		return nil, fmt.Errorf("materialized table %s of group %q: no database (the group's checkpoint is in the store; give the table's DSN)", m.Table, m.Group)
	}
	if m.Field == "" {
		m.Field = "event_id"
	}
	if m.Field != "event_id" && m.Field != "key" && !strings.HasPrefix(m.Field, "payload.") {
		return nil, fmt.Errorf("materialized table %s: event field %q: want event_id, key or payload.<name>", m.Table, m.Field)
	}
	end, err := closedEnd(ctx, cfg, ts, cp)
	if err != nil {
		return nil, err
	}
	end = end.Truncate(cfg.Period)
	c := &Completeness{Table: m.Table, Column: m.Column, Field: m.Field, From: end.Add(-time.Duration(cfg.Periods) * cfg.Period), To: end}
	conn, err := pgsource.Connect(ctx, dsn)
	if err != nil {
		return c, fmt.Errorf("materialized table %s: connect: %w", m.Table, err)
	}
	defer conn.Close(context.Background())
	k := &counter{conn: conn, table: pgx.Identifier(strings.Split(m.Table, ".")).Sanitize(),
		column: pgx.Identifier{m.Column}.Sanitize(), c: c, periods: map[time.Time]*[2]int64{}}
	if err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, m.Table, m.Column).Scan(&k.typ); err != nil {
		return c, fmt.Errorf("materialized table %s column %s: %w", m.Table, m.Column, err)
	}
	if err := k.scan(ctx, ts, cfg.Period, m.Field); err != nil {
		return c, err
	}
	k.finish()
	return c, nil
}

// closedEnd is the end of the closed periods for the group: the smallest
// source commit_time of the first version it has not consumed (from the
// files' stats, of any topic in a group's table), or now when it has
// consumed everything (every event of a grouped topic), minus the grace.
func closedEnd(ctx context.Context, cfg Config, ts *topicState, cp subscribe.Checkpoint) (time.Time, error) {
	if cp.Version > ts.snap.Version {
		return cfg.Now().Add(-cfg.Grace), nil
	}
	if ts.place.Shared() { // caught up with the topic, if not with its group's table
		if v, err := ts.newestOfTopic(ctx, cp.Version); err != nil || v < 0 {
			return cfg.Now().Add(-cfg.Grace), err
		}
	}
	data, err := ts.tbl.Get(ctx, delta.CommitKey(cp.Version))
	if err != nil {
		return time.Time{}, fmt.Errorf("read version %d: %w", cp.Version, err)
	}
	acts, err := delta.ParseCommit(data)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse version %d: %w", cp.Version, err)
	}
	end := time.Time{}
	for _, a := range acts {
		if a.Add == nil || !a.Add.DataChange {
			continue
		}
		if lo, _, ok := commitTimeBounds(a.Add.Stats); ok && (end.IsZero() || lo.Before(end)) {
			end = lo
		}
	}
	if end.IsZero() {
		t, _, err := ts.versionTime(ctx, cp.Version)
		if err != nil {
			return time.Time{}, err
		}
		end = t
	}
	return end.Add(-cfg.Grace), nil
}

// commitTimeBounds reads min/max commit_time from a file's stats.
func commitTimeBounds(stats string) (lo, hi time.Time, ok bool) {
	var s struct {
		Min struct {
			CommitTime time.Time `json:"commit_time"`
		} `json:"minValues"`
		Max struct {
			CommitTime time.Time `json:"commit_time"`
		} `json:"maxValues"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil || s.Min.CommitTime.IsZero() || s.Max.CommitTime.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	return s.Min.CommitTime, s.Max.CommitTime.Add(time.Millisecond), true
}

// scan reads the events of the closed periods from the table's current
// files (skipping files whose stats lie outside, or, in a group's table,
// whose topic bounds exclude the topic) and counts the keys of the
// topic's events.
func (k *counter) scan(ctx context.Context, ts *topicState, period time.Duration, field string) error {
	paths := make([]string, 0, len(ts.snap.Files))
	for p := range ts.snap.Files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	chunk := map[string]struct{}{}
	var chunkPeriod time.Time
	for _, p := range paths {
		add := ts.snap.Files[p]
		if lo, hi, ok := commitTimeBounds(add.Stats); ok && (!hi.After(k.c.From) || !lo.Before(k.c.To)) {
			continue
		}
		shared := ts.place.Shared()
		if shared && !topic.MayHold(add.Stats, ts.place.Topic) {
			continue
		}
		err := topic.ReadEvents(ctx, ts.tbl, add, func(e outbox.Event) error {
			if (shared && e.Topic != ts.place.Topic) || e.CommitTime.Before(k.c.From) || !e.CommitTime.Before(k.c.To) {
				return nil
			}
			key, ok := eventKey(e, field)
			if !ok {
				return nil
			}
			per := e.CommitTime.Truncate(period)
			if per != chunkPeriod || len(chunk) >= keyChunk {
				if err := k.flush(ctx, chunkPeriod, chunk); err != nil {
					return err
				}
				chunkPeriod = per
			}
			chunk[key] = struct{}{}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return k.flush(ctx, chunkPeriod, chunk)
}

// flush counts one chunk of distinct keys against the table and empties it.
func (k *counter) flush(ctx context.Context, period time.Time, chunk map[string]struct{}) error {
	if len(chunk) == 0 {
		return nil
	}
	keys := make([]string, 0, len(chunk))
	for key := range chunk {
		keys = append(keys, key)
	}
	clear(chunk)
	var found, rows int64
	sql := fmt.Sprintf(`SELECT count(DISTINCT %s), count(*) FROM %s WHERE %s = ANY($1::text[]::%s[])`, k.column, k.table, k.column, k.typ)
	if err := k.conn.QueryRow(ctx, sql, keys).Scan(&found, &rows); err != nil {
		return fmt.Errorf("count keys in %s: %w", k.table, err)
	}
	k.c.Expected += int64(len(keys))
	k.c.Found += found
	k.c.Rows += rows
	p := k.periods[period]
	if p == nil {
		p = new([2]int64)
		k.periods[period] = p
	}
	p[0], p[1] = p[0]+int64(len(keys)), p[1]+found
	if found < int64(len(keys)) && len(k.c.MissingSample) < 5 {
		return k.sampleMissing(ctx, keys)
	}
	return nil
}

func (k *counter) sampleMissing(ctx context.Context, keys []string) error {
	sql := fmt.Sprintf(`SELECT k FROM unnest($1::text[]) k WHERE NOT EXISTS (SELECT 1 FROM %s t WHERE t.%s = k::%s) ORDER BY k LIMIT $2`,
		k.table, k.column, k.typ)
	rows, err := k.conn.Query(ctx, sql, keys, 5-len(k.c.MissingSample))
	if err != nil {
		return fmt.Errorf("sample missing keys in %s: %w", k.table, err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	k.c.MissingSample = append(k.c.MissingSample, missing...)
	return err
}

func (k *counter) finish() {
	c := k.c
	c.Missing = c.Expected - c.Found
	c.Duplicates = c.Rows - c.Found
	c.Ratio = 1
	if c.Expected > 0 {
		c.Ratio = float64(c.Found) / float64(c.Expected)
	}
	if c.Rows > 0 {
		c.DuplicateRate = float64(c.Duplicates) / float64(c.Rows)
	}
	worst := 1.0
	for start, p := range k.periods {
		if r := float64(p[1]) / float64(p[0]); r < worst {
			worst, c.WorstPeriod = r, start.UTC().Format(time.RFC3339)
		}
	}
}

// eventKey extracts the business key of an event.
func eventKey(e outbox.Event, field string) (string, bool) {
	switch {
	case field == "event_id":
		return e.ID, true
	case field == "key":
		return e.Key, true
	}
	name, ok := strings.CutPrefix(field, "payload.")
	if !ok {
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(e.Payload), &obj) != nil {
		return "", false
	}
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(bytes.TrimSpace(raw)), true
}
