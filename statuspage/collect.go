package statuspage

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/governance"
	"github.com/deltabus/deltabus/reconcile"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/check"
	"github.com/deltabus/deltabus/topicmeta"
)

// Config is what the page reads.
type Config struct {
	Store storage.Store
	// AppID returns the relay's appId (known once a session resolved the
	// source's identity; "" before).
	AppID   func() string
	Slot    string
	Version string
	Ready   func() (bool, string) // nil: always ready
	// SlotMonitor, if set, gives the slot section (the relay's own
	// reading; the page opens no connection).
	SlotMonitor *SlotMonitor
	// UnityCatalog, if set, gives the registration section.
	UnityCatalog func() *governance.UCStatus
	// Consumers is `relay check consumers`' configuration (checkpoint
	// databases, materialised groups); its Store is Store.
	Consumers check.Config
	// Refresh is how often the page reloads and the longest the data is
	// reused (default 5 s); consumer checks are reused six times as long.
	Refresh time.Duration
	Log     *slog.Logger
	Now     func() time.Time
}

// Collector gathers a Status on demand, at most once per Refresh.
type Collector struct {
	cfg Config

	mu        sync.Mutex
	last      *Status
	consumers []Consumer
	consErr   string
	consAt    time.Time
}

// New returns a Collector.
func New(cfg Config) *Collector {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Consumers.Store, cfg.Consumers.Logger = cfg.Store, cfg.Log
	return &Collector{cfg: cfg}
}

// Status returns the current status, gathered afresh when the last one is
// older than Refresh. Concurrent callers share one gathering.
func (c *Collector) Status(ctx context.Context) *Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if c.last != nil && now.Sub(c.last.GeneratedAt) < c.cfg.Refresh {
		return c.last
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c.last = c.gather(gctx, now)
	return c.last
}

func (c *Collector) gather(ctx context.Context, now time.Time) *Status {
	st := &Status{GeneratedAt: now.UTC(), Sources: []Source{}, Failovers: []Failover{}, Topics: []Topic{}, Consumers: []Consumer{}, Reconcile: []reconcile.TopicLast{}}
	appID := ""
	if c.cfg.AppID != nil {
		appID = c.cfg.AppID()
	}
	st.Relay = Relay{AppID: appID, Slot: c.cfg.Slot, Store: c.cfg.Store.String(), Version: c.cfg.Version, Ready: true, Why: "ready"}
	if c.cfg.Ready != nil {
		st.Relay.Ready, st.Relay.Why = c.cfg.Ready()
	}
	fail := func(what string, err error) { st.Errors = append(st.Errors, what+": "+err.Error()) }
	if c.cfg.SlotMonitor != nil {
		st.Slot = c.cfg.SlotMonitor.Last()
	}
	if c.cfg.UnityCatalog != nil {
		st.UnityCatalog = c.cfg.UnityCatalog()
	}
	if ms, err := catalog.ListMarkers(ctx, c.cfg.Store); err != nil {
		fail("sources", err)
	} else {
		for _, m := range ms {
			st.Sources = append(st.Sources, Source{AppID: m.AppID, Slot: m.Slot, Database: m.Database, SystemID: m.SystemID,
				ConsistentPoint: m.ConsistentPoint, Since: m.CreatedAt, This: m.AppID == appID, Timeline: m.Timeline})
		}
	}
	if forks, err := catalog.ListForks(ctx, c.cfg.Store); err != nil {
		fail("failovers", err)
	} else {
		st.Failovers = Failovers(forks)
	}
	if infos, err := topicmeta.Load(ctx, c.cfg.Store); err != nil {
		fail("topics", err)
	} else {
		for _, in := range infos {
			st.Topics = append(st.Topics, c.topic(ctx, in, appID, now))
		}
	}
	st.Consumers = c.consumerRows(ctx, now, st)
	if last, err := reconcile.LastResults(ctx, c.cfg.Store, 50); err != nil {
		fail("reconcile", err)
	} else {
		for _, r := range last {
			st.Reconcile = append(st.Reconcile, r)
		}
		sort.Slice(st.Reconcile, func(i, j int) bool { return st.Reconcile[i].Topic < st.Reconcile[j].Topic })
	}
	dl, err := deadLetters(ctx, c.cfg.Store, now.Add(-time.Hour))
	if err != nil {
		fail("dead letters", err)
	}
	st.DeadLetters = dl
	if st.Republished, err = republishRuns(ctx, c.cfg.Store); err != nil {
		fail("redrives and repairs", err)
	}
	return st
}

func (c *Collector) topic(ctx context.Context, in topicmeta.Info, appID string, now time.Time) Topic {
	t := Topic{Topic: in.Topic, Group: in.Group, Table: in.Table, Owner: in.Owner, Description: in.Description, Events: in.Records,
		SharedEvents: in.SharedRecords, Version: in.Version, LastCommit: in.LastCommit, Contracts: topicmeta.ContractsText(in.Contracts),
		Personal: topicmeta.PersonalText(in.PersonalColumns), Problem: in.Problem}
	for _, s := range in.Sources { // a grouped topic's sources are its txns appId/topic
		if s.AppID == appID && appID != "" {
			t.Position = s.TxnLSN
		}
	}
	if !in.LastCommit.IsZero() {
		age := now.Sub(in.LastCommit).Seconds()
		t.AgeSeconds = &age
	}
	if appID == "" {
		return t // holds are per relay: not known before its first session
	}
	rs, _, err := catalog.ReadRebuildState(ctx, c.cfg.Store, appID, in.Topic)
	switch {
	case err != nil:
		t.Problem = err.Error()
	case rs.Paused == catalog.HoldMissingTable || rs.Paused == catalog.HoldIncompatibleTable ||
		rs.Paused == catalog.HoldContract || rs.Paused == catalog.HoldDeadLetterRate:
		t.Held, t.HeldWhy, t.HeldSince = true, rs.Paused+": "+rs.Last, rs.PausedAt
	case rs.Paused != "":
		t.Held, t.HeldWhy, t.HeldSince = true, "paused for rebuild "+rs.Paused, rs.PausedAt
	}
	return t
}

// consumerRows runs the consumer check at most once per six refreshes.
func (c *Collector) consumerRows(ctx context.Context, now time.Time, st *Status) []Consumer {
	if c.consumers != nil && now.Sub(c.consAt) < 6*c.cfg.Refresh {
		if c.consErr != "" {
			st.Errors = append(st.Errors, c.consErr)
		}
		return c.consumers
	}
	cfg := c.cfg.Consumers
	cfg.Now = c.cfg.Now
	rows, err := check.Run(ctx, cfg)
	c.consAt, c.consErr = now, ""
	if err != nil {
		c.consErr = "consumers: " + err.Error()
		st.Errors = append(st.Errors, c.consErr)
		if c.consumers == nil {
			c.consumers = []Consumer{}
		}
		return c.consumers
	}
	out := make([]Consumer, 0, len(rows))
	for _, r := range rows {
		cr := Consumer{Group: r.Group, Topic: r.Topic, Checkpoints: r.Checkpoints, LagVersions: r.LagVersions, LagSeconds: r.LagSeconds,
			HeadroomVersions: r.HeadroomVersions, HeadroomSeconds: r.HeadroomSeconds, Breaches: r.Breaches, Error: r.Error, Members: r.Members}
		if r.Completeness != nil {
			ratio, dup := r.Completeness.Ratio, r.Completeness.DuplicateRate
			cr.Completeness, cr.DuplicateRate = &ratio, &dup
		}
		out = append(out, cr)
	}
	c.consumers = out
	return out
}

// idsShown is how many phantom ids a failover row shows per topic.
const idsShown = 5

// Failovers renders fork records, newest first.
func Failovers(forks []catalog.Fork) []Failover {
	out := make([]Failover, 0, len(forks))
	for _, f := range forks {
		row := Failover{AppID: f.AppID, FromTimeline: f.FromTimeline, ToTimeline: f.ToTimeline, ForkLSN: f.ForkLSN,
			DetectedAt: f.DetectedAt, Phantoms: f.Count()}
		for _, t := range f.Topics() {
			p := f.Phantoms[t]
			row.Topics = append(row.Topics, FailoverTopic{Topic: t, Count: len(p.IDs), FirstLSN: p.FirstLSN, LastLSN: p.LastLSN,
				IDs: p.IDs[:min(len(p.IDs), idsShown)]})
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DetectedAt.After(out[j].DetectedAt) })
	return out
}
