// Package check is `relay check consumers`: one row per (consumer group,
// topic), never an aggregate, with
//
//   - lag: versions between the group's position and the newest commit, and
//     seconds between the newest commit and the group's last consumed one
//     (for a topic of a group: the newest commit of the group's table that
//     may hold the topic's events, see newestOfTopic);
//   - retention headroom: the group's position against the earliest version
//     the log still holds, and the time left before log clean-up passes
//     it: the first checkpoint after the position becomes clean-up's
//     boundary once its commit is older than delta.logRetentionDuration,
//     so time left = its commit time + the retention − now (the retention
//     itself while no checkpoint follows the position);
//   - per source database writing the topic (a Delta txn appId; in a
//     group's table the txn appId/topic, catalog.TxnAppID), the WAL
//     position of its events the group has read against its newest one
//     in the table, so that a shared topic's lag can be told per source;
//   - for groups that materialise the topic into a PostgreSQL table
//     (declared by table and business-key column), completeness of closed
//     periods (distinct business keys of the topic's events in the period
//     against those present in the table) and the duplicate rate on the
//     business key (rows beyond the first per key, over the rows of those
//     keys).
//
// A period is closed for a group when every event committed in it lies
// before the group's position: it ends at or before the smallest source
// commit_time of the first version the group has not consumed (minus a
// grace for concurrent source transactions), or now when caught up.
//
// A topic of a group (catalog.Group) is checked on its group's table:
// versions, retention and headroom are the table's; lag counts up to the
// newest version that may hold the topic's events, and is none when the
// group has read every source's position in the topic (its txns), however
// far the table went on with other topics; completeness counts the
// topic's events only, and a group that read all of them is caught up.
//
// Thresholds turn rows into breaches; Metrics exports the rows as
// Prometheus gauges.
package check

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
)

// Materialized declares that a group writes one row per event into a
// PostgreSQL table.
type Materialized struct {
	Group  string
	Table  string // schema.table, in the database holding the group's checkpoint (or DSN)
	Column string // the business-key column
	// Field is the event field the key comes from: "event_id" (default),
	// "key", or "payload.<name>" (a top-level payload member; events
	// without it are not expected in the table).
	Field string
	DSN   string // database of the table; default the group's checkpoint database, else the first of CheckpointDSNs
}

// Thresholds make a row a breach; zero values are off (MaxDuplicateRate: <0).
type Thresholds struct {
	MaxLagVersions   int64
	MaxLagSeconds    float64
	MinHeadroom      time.Duration
	MinCompleteness  float64
	MaxDuplicateRate float64
}

// Config is what `relay check consumers` parsed.
type Config struct {
	Store          storage.Store
	CheckpointDSNs []string // PostgreSQL databases holding pgcheckpoint tables
	Materialized   []Materialized
	Period         time.Duration // closed-period length (default 1h)
	Periods        int           // closed periods checked (default 24)
	Grace          time.Duration // default 1m
	Thresholds     Thresholds
	Now            func() time.Time
	Logger         *slog.Logger
}

func (c *Config) defaults() {
	if c.Period <= 0 {
		c.Period = time.Hour
	}
	if c.Periods <= 0 {
		c.Periods = 24
	}
	if c.Grace <= 0 {
		c.Grace = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Row is one (group, topic).
type Row struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Checkpoints string `json:"checkpoints"` // "store" or "postgres <host>/<db>"
	Version     int64  `json:"version"`
	Offset      int64  `json:"offset"`
	// Table is, for a topic of a group, the group's table (the topic's
	// own table otherwise: omitted). Versions are the table's.
	Table string `json:"table,omitempty"`

	LatestVersion int64   `json:"latest_version"`
	LagVersions   int64   `json:"lag_versions"`
	LagSeconds    float64 `json:"lag_seconds"`

	EarliestVersion  int64   `json:"earliest_version"`
	HeadroomVersions int64   `json:"headroom_versions"`
	HeadroomSeconds  float64 `json:"headroom_seconds"`
	Retention        string  `json:"retention"`

	// Sources: per source database writing the topic, what the group has
	// read of it (a shared topic's lag per source).
	Sources []SourceRead `json:"sources"`

	Completeness *Completeness `json:"completeness,omitempty"`
	// Members is set for a group served to parallel members (relay serve).
	Members  *MembersInfo `json:"members,omitempty"`
	Breaches []string     `json:"breaches,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// source is one group's checkpoint with where it lives.
type source struct {
	cp      subscribe.Checkpoint
	name    string
	dsn     string
	members *members.Stored // a members group (relay serve)
}

// Run checks every consumer group found in the store and in the
// checkpoint databases. An unreadable topic or table is reported in its
// row (Error) and counts as a breach; errors returned are the ones that
// prevent checking at all.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	cfg.defaults()
	srcs, err := sources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	databases, err := sourceDatabases(ctx, cfg)
	if err != nil {
		return nil, err
	}
	groups, err := catalog.ListGroups(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	topics, tables := map[string]*topicState{}, map[string]*tableState{}
	rows := make([]Row, 0, len(srcs))
	for _, s := range srcs {
		ts, ok := topics[s.cp.Topic]
		if !ok {
			ts = loadTopic(ctx, cfg.Store, s.cp.Topic, groups, tables)
			topics[s.cp.Topic] = ts
		}
		row := ts.row(ctx, s, cfg.Now(), databases)
		if m := findMaterialized(cfg.Materialized, s.cp.Group); m != nil && ts.err == nil && row.Error == "" {
			dsn := cmp.Or(m.DSN, s.dsn)
			if dsn == "" && len(cfg.CheckpointDSNs) > 0 {
				dsn = cfg.CheckpointDSNs[0]
			}
			c, err := completeness(ctx, cfg, ts, s.cp, *m, dsn)
			if err != nil {
				row.Error = err.Error()
			}
			row.Completeness = c
		}
		row.Breaches = cfg.Thresholds.breaches(row)
		rows = append(rows, row)
	}
	return rows, nil
}

// sourceDatabases maps each relay's appId to the database its marker names.
func sourceDatabases(ctx context.Context, cfg Config) (map[string]string, error) {
	markers, err := catalog.ListMarkers(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range markers {
		out[m.AppID] = m.Database
	}
	return out, nil
}

func findMaterialized(ms []Materialized, group string) *Materialized {
	for i := range ms {
		if ms[i].Group == group {
			return &ms[i]
		}
	}
	return nil
}

func sources(ctx context.Context, cfg Config) ([]source, error) {
	var out []source
	cps, err := subscribe.NewStoreCheckpoints(cfg.Store).List(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range cps {
		out = append(out, source{cp: c, name: "store"})
	}
	ms, err := membersSources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	out = append(out, ms...)
	for _, dsn := range cfg.CheckpointDSNs {
		list, name, err := listPG(ctx, dsn)
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			out = append(out, source{cp: c, name: name, dsn: dsn})
		}
	}
	return out, nil
}

func listPG(ctx context.Context, dsn string) ([]subscribe.Checkpoint, string, error) {
	pool, err := pgsource.NewPool(ctx, dsn)
	if err != nil {
		return nil, "", fmt.Errorf("--checkpoint: %w", err)
	}
	defer pool.Close()
	name := "postgres " + pool.Config().ConnConfig.Host + "/" + pool.Config().ConnConfig.Database
	s := pgcheckpoint.New(pool, "")
	exists, err := s.Exists(ctx)
	if err != nil || !exists {
		return nil, name, err
	}
	list, err := s.List(ctx)
	return list, name, err
}

func (ts *topicState) row(ctx context.Context, s source, now time.Time, databases map[string]string) Row {
	r := Row{Group: s.cp.Group, Topic: s.cp.Topic, Checkpoints: s.name, Version: s.cp.Version, Offset: s.cp.Offset}
	if ts.place.Shared() {
		r.Table = ts.place.Table
	}
	if ts.err != nil {
		r.Error = ts.err.Error()
		return r
	}
	if s.cp.TableID != "" && s.cp.TableID != ts.snap.Metadata.ID {
		r.Error = "the topic's table was replaced since this checkpoint: reset the group"
	}
	if err := ts.lag(ctx, &r); err != nil {
		r.Error = err.Error()
	}
	if err := ts.headroom(ctx, &r, now); err != nil {
		r.Error = err.Error()
	}
	if err := ts.sourceReads(ctx, &r, databases); err != nil {
		r.Error = err.Error()
	}
	if s.members != nil {
		membersRow(&r, s.members, now)
	}
	return r
}

// lag is the versions and seconds from the group's position to the
// newest commit, for a grouped topic the newest that may hold its events
// (newestOfTopic): the group passes its group table's later versions
// without delivering anything.
func (ts *topicState) lag(ctx context.Context, r *Row) error {
	r.LatestVersion = ts.snap.Version
	newestV := r.LatestVersion
	if ts.place.Shared() {
		var err error
		if newestV, err = ts.newestOfTopic(ctx, r.Version); err != nil {
			return err
		}
	}
	r.LagVersions = max(0, newestV-r.Version+1)
	if r.LagVersions == 0 {
		return nil
	}
	newest, ok, err := ts.versionTime(ctx, newestV)
	if err != nil || !ok {
		return err
	}
	pos, ok, err := ts.versionTime(ctx, r.Version-1) // the last version consumed
	if err == nil && !ok {
		pos, ok, err = ts.versionTime(ctx, r.Version)
	}
	if err != nil || !ok {
		return err
	}
	r.LagSeconds = newest.Sub(pos).Seconds()
	return nil
}

func (ts *topicState) headroom(ctx context.Context, r *Row, now time.Time) error {
	r.EarliestVersion = ts.view.First
	r.HeadroomVersions = r.Version - r.EarliestVersion
	r.Retention = ts.retention.String()
	if r.HeadroomVersions < 0 {
		r.HeadroomSeconds = 0
		return nil
	}
	k := ts.view.CheckpointAfter(r.Version)
	if k < 0 {
		r.HeadroomSeconds = ts.retention.Seconds()
		return nil
	}
	tk, ok, err := ts.versionTime(ctx, k)
	if err != nil || !ok {
		r.HeadroomSeconds = ts.retention.Seconds()
		return err
	}
	r.HeadroomSeconds = tk.Add(ts.retention).Sub(now).Seconds()
	return nil
}

func (th Thresholds) breaches(r Row) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if r.Error != "" {
		add("error: %s", r.Error)
	}
	if r.HeadroomVersions < 0 {
		add("retention passed this group's position (version %d, earliest %d)", r.Version, r.EarliestVersion)
	}
	out = append(out, membersBreaches(r)...)
	if th.MaxLagVersions > 0 && r.LagVersions > th.MaxLagVersions {
		add("lag %d versions > %d", r.LagVersions, th.MaxLagVersions)
	}
	if th.MaxLagSeconds > 0 && r.LagSeconds > th.MaxLagSeconds {
		add("lag %.0fs > %.0fs", r.LagSeconds, th.MaxLagSeconds)
	}
	if th.MinHeadroom > 0 && r.HeadroomVersions >= 0 && r.HeadroomSeconds < th.MinHeadroom.Seconds() {
		add("retention headroom %s < %s", time.Duration(r.HeadroomSeconds*float64(time.Second)).Round(time.Second), th.MinHeadroom)
	}
	if c := r.Completeness; c != nil {
		if th.MinCompleteness > 0 && c.Expected > 0 && c.Ratio < th.MinCompleteness {
			add("completeness %.4f < %.4f (%d of %d keys missing)", c.Ratio, th.MinCompleteness, c.Missing, c.Expected)
		}
		if th.MaxDuplicateRate >= 0 && c.DuplicateRate > th.MaxDuplicateRate {
			add("duplicate rate %.4f > %.4f", c.DuplicateRate, th.MaxDuplicateRate)
		}
	}
	return out
}
