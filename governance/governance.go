// Package governance is what `relay run` does for governed topics in the
// background, beside the stream and never in its way: it writes each
// topic's description and column comments into its table once the table
// exists (topicmeta.Apply), and, when Unity Catalog is configured,
// registers each new topic there (unitycatalog.Client.Register).
//
// Guarantees:
//   - The stream never waits for it: it runs in its own goroutine with its
//     own store and HTTP calls; a Unity Catalog that is down or slow only
//     delays registrations.
//   - A failure is logged once (again only when it changes, or once it is
//     cured), retried with exponential backoff (1 s to 5 min), and shown:
//     Status (the operator's page) and the store's catalog
//     (unitycatalog/<appId>.json, read by `relay status`).
//   - New topics are seen within one interval (default 5 s) of their
//     table's registration in the store; every topic is looked at again
//     every ten minutes (a description set while its table did not exist,
//     a new contract version).
//   - It only ever creates registrations: bringing a changed description
//     or schema up to date in Unity Catalog (delete and create) is left to
//     `relay catalog sync`, which an operator runs.
//   - A topic group's table (catalog.Group) is handled once for all its
//     topics: its metaData carries the group's own description
//     (topicmeta.ApplyGroup: its topics, and how to read one), written
//     again when a topic joins, never a topic's own description; it is
//     registered in Unity Catalog once (unitycatalog.Client.RegisterGroup),
//     and each of its topics counts as registered once it is. Topics
//     joining a group whose table is registered already are listed in its
//     Unity Catalog entry by `relay catalog sync`.
//   - Each topic's registry entry is read once (a topic never moves), so
//     a round in which nothing is new lists the registry and reads nothing
//     else.
package governance

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/unitycatalog"
)

// Config configures a Governor.
type Config struct {
	Store    storage.Store
	AppID    string // the relay's (catalog key of its registration status)
	Log      *slog.Logger
	Interval time.Duration // how often to look for new topics; 0 = 5s
	// UC, if set, registers new topics in Target.Catalog.Target.Schema.
	UC     *unitycatalog.Client
	Target unitycatalog.Target
}

// UCStatus is the state of the relay's Unity Catalog registrations.
type UCStatus struct {
	URL        string            `json:"url"`
	Catalog    string            `json:"catalog"`
	Schema     string            `json:"schema"`
	Registered []string          `json:"registered"`        // topics registered (by this relay or found so)
	Pending    map[string]string `json:"pending,omitempty"` // topics not registered yet -> why
	OK         bool              `json:"ok"`                // the last attempt succeeded
	LastError  string            `json:"lastError,omitempty"`
	FailedAt   time.Time         `json:"failedAt,omitzero"`
	NextRetry  time.Time         `json:"nextRetry,omitzero"`
	Updated    time.Time         `json:"updated"`
}

// Governor runs the background duties.
type Governor struct {
	cfg Config

	mu      sync.Mutex
	uc      *UCStatus
	applied map[string]bool
	// places holds each registered topic's placement; groupsApplied, per
	// group, the topics its table's description was written for.
	places        map[string]catalog.Placement
	groupsApplied map[string]string
	backoff       time.Duration
	retryAt       time.Time
	logged        string // the last failure logged
	saved         string // the last status written to the store
	schemaOK      bool
	recheck       time.Time
}

// New returns a Governor; Run starts it.
func New(cfg Config) *Governor {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	g := &Governor{cfg: cfg, applied: map[string]bool{}, places: map[string]catalog.Placement{}, groupsApplied: map[string]string{},
		recheck: time.Now().Add(10 * time.Minute)}
	if cfg.UC != nil {
		g.uc = &UCStatus{URL: cfg.UC.String(), Catalog: cfg.Target.Catalog, Schema: cfg.Target.Schema, Registered: []string{}, Pending: map[string]string{}}
	}
	return g
}

// UnityCatalog returns a copy of the registration status (nil without
// Unity Catalog).
func (g *Governor) UnityCatalog() *UCStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.uc == nil {
		return nil
	}
	c := *g.uc
	c.Registered = append([]string(nil), g.uc.Registered...)
	c.Pending = make(map[string]string, len(g.uc.Pending))
	for k, v := range g.uc.Pending {
		c.Pending[k] = v
	}
	return &c
}

// Run works until ctx ends.
func (g *Governor) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		g.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round looks at every topic not yet handled.
func (g *Governor) round(ctx context.Context) {
	if time.Now().After(g.recheck) {
		g.mu.Lock()
		g.applied, g.groupsApplied, g.recheck = map[string]bool{}, map[string]string{}, time.Now().Add(10*time.Minute)
		g.mu.Unlock()
	}
	names, err := catalog.ListTopics(ctx, g.cfg.Store)
	if err != nil {
		if ctx.Err() == nil {
			g.cfg.Log.Warn("governance: cannot list topics; trying again", "err", err)
		}
		return
	}
	groups := map[string][]string{} // group -> its registered topics
	var order []string
	for _, n := range names {
		if ctx.Err() != nil {
			return
		}
		p, ok := g.place(ctx, n)
		if !ok {
			continue // unreadable for now: the next round
		}
		if p.Shared() {
			if _, seen := groups[p.Group()]; !seen {
				order = append(order, p.Group())
			}
			groups[p.Group()] = append(groups[p.Group()], n)
			continue
		}
		if g.isApplied(n) && !g.needsRegistration(n) {
			continue
		}
		in, err := topicmeta.LoadTopic(ctx, g.cfg.Store, n)
		if err != nil || in.Version < 0 {
			continue // no table yet, or the store is unreadable: the next round
		}
		if !g.isApplied(n) && g.apply(ctx, in) {
			if in, err = topicmeta.LoadTopic(ctx, g.cfg.Store, n); err != nil {
				continue // register what the table now says, next round
			}
		}
		if g.needsRegistration(n) && time.Now().After(g.retryAt) {
			g.register(ctx, in)
		}
	}
	for _, grp := range order {
		if ctx.Err() != nil {
			return
		}
		g.governGroup(ctx, grp, groups[grp])
	}
	g.save(ctx)
}

// place returns the topic's placement, read once.
func (g *Governor) place(ctx context.Context, topic string) (catalog.Placement, bool) {
	if p, ok := g.places[topic]; ok {
		return p, true
	}
	p, err := catalog.ReadPlacement(ctx, g.cfg.Store, topic, nil)
	if err != nil {
		if ctx.Err() == nil {
			g.cfg.Log.Debug("governance: cannot read where the topic lives; trying again next round", "topic", topic, "err", err)
		}
		return p, false
	}
	if p.Registered {
		g.places[topic] = p
	}
	return p, true
}

func (g *Governor) isApplied(topic string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.applied[topic]
}

func (g *Governor) needsRegistration(topic string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.uc == nil {
		return false
	}
	i := sort.SearchStrings(g.uc.Registered, topic)
	return i == len(g.uc.Registered) || g.uc.Registered[i] != topic
}

// apply writes the description and comments into the topic's table and
// reports whether it committed.
func (g *Governor) apply(ctx context.Context, in topicmeta.Info) bool {
	v, changed, err := topicmeta.Apply(ctx, g.cfg.Store, in)
	switch {
	case errors.Is(err, topicmeta.ErrNoTable):
		return false
	case err != nil:
		if ctx.Err() == nil {
			g.cfg.Log.Warn("governance: cannot write the topic's description and column comments into its table; trying again later", "topic", in.Topic, "err", err)
		}
		return false
	case changed:
		g.cfg.Log.Info("governance: topic table carries its description and column comments", "topic", in.Topic, "version", v)
	}
	g.mu.Lock()
	g.applied[in.Topic] = true
	g.mu.Unlock()
	return changed
}

func (g *Governor) register(ctx context.Context, in topicmeta.Info) {
	if !g.ensureSchema(ctx, []string{in.Topic}) {
		return
	}
	created, conflict, err := g.cfg.UC.Register(ctx, g.cfg.Target, in)
	g.registered(ctx, []string{in.Topic}, unitycatalog.TableName(in.Topic), created, conflict, err)
}

// ensureSchema creates the catalog and schema once per relay (again after
// a registration found it gone).
func (g *Governor) ensureSchema(ctx context.Context, topics []string) bool {
	if g.schemaOK {
		return true
	}
	if _, _, err := g.cfg.UC.EnsureSchema(ctx, g.cfg.Target); err != nil {
		g.failed(ctx, topics, err)
		return false
	}
	g.schemaOK = true
	return true
}

// registered records the outcome of registering table, for topics.
func (g *Governor) registered(ctx context.Context, topics []string, table string, created bool, conflict string, err error) {
	if unitycatalog.IsNotFound(err) {
		g.schemaOK = false // the schema was dropped meanwhile: create it again next time
	}
	if err != nil {
		g.failed(ctx, topics, err)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.uc
	if conflict != "" {
		for _, t := range topics {
			st.Pending[t] = "conflict: " + conflict
		}
		if g.logged != conflict {
			g.logged = conflict
			g.cfg.Log.Error("governance: Unity Catalog holds another table under the name of the topic's table; drop or rename it", "topics", topics, "conflict", conflict)
		}
		return
	}
	if !st.OK && st.LastError != "" {
		g.cfg.Log.Info("governance: Unity Catalog answers again", "url", st.URL)
	}
	for _, t := range topics {
		delete(st.Pending, t)
		if i := sort.SearchStrings(st.Registered, t); i == len(st.Registered) || st.Registered[i] != t {
			st.Registered = slices.Insert(st.Registered, i, t)
		}
	}
	st.OK, st.LastError, st.NextRetry = true, "", time.Time{}
	g.backoff, g.logged = 0, ""
	if created {
		g.cfg.Log.Info("governance: table registered in Unity Catalog", "topics", topics,
			"table", g.cfg.Target.Catalog+"."+g.cfg.Target.Schema+"."+table)
	}
}

// failed records a failed registration: logged once per distinct error,
// retried after a growing pause.
func (g *Governor) failed(ctx context.Context, topics []string, err error) {
	if ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backoff = min(max(2*g.backoff, time.Second), 5*time.Minute)
	now := time.Now()
	g.retryAt = now.Add(g.backoff)
	st := g.uc
	st.OK, st.LastError, st.FailedAt, st.NextRetry = false, err.Error(), now, g.retryAt
	for _, t := range topics {
		st.Pending[t] = err.Error()
	}
	if msg := err.Error(); msg != g.logged {
		g.logged = msg
		g.cfg.Log.Error("governance: Unity Catalog registration failed; the stream is not affected, retrying with backoff", "topics", topics, "err", err, "retry_in", g.backoff)
	}
}

// save writes the status to the store when it changed.
func (g *Governor) save(ctx context.Context) {
	st := g.UnityCatalog()
	if st == nil {
		return
	}
	key := fingerprint(st)
	if key == g.saved {
		return
	}
	st.Updated = time.Now().UTC()
	if err := catalog.WriteRegistration(ctx, g.cfg.Store, g.cfg.AppID, st); err != nil {
		if ctx.Err() == nil {
			g.cfg.Log.Warn("governance: cannot record the Unity Catalog status in the store", "err", err)
		}
		return
	}
	g.saved = key
}

func fingerprint(st *UCStatus) string {
	s := st.LastError + "|"
	for _, r := range st.Registered {
		s += r + ","
	}
	keys := make([]string, 0, len(st.Pending))
	for k := range st.Pending {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s += k + "=" + st.Pending[k] + ";"
	}
	return s
}

// ReadStatus returns what the relay with appID last recorded of its Unity
// Catalog registrations (ok=false: it registers none).
func ReadStatus(ctx context.Context, store storage.Store, appID string) (UCStatus, bool, error) {
	var st UCStatus
	ok, err := catalog.ReadRegistration(ctx, store, appID, &st)
	return st, ok, err
}
