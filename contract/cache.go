package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// Defaults of Options.
const (
	DefaultPoll       = 30 * time.Second
	DefaultMaxSchemas = 1024
	DefaultRefresh    = time.Second
)

// Options tune a Cache. The zero value is usable.
type Options struct {
	// Poll is how often the registry is listed again for new versions and
	// policies (default DefaultPoll; negative: never, only on demand).
	// Each poll is one List of the contracts folder.
	Poll time.Duration
	// Refresh is the least time between two on-demand re-reads of one
	// type (an event of a version not yet seen) or one strict topic (an
	// event of a type without contracts): default DefaultRefresh. A row
	// can therefore cost at most one List per registered type or strict
	// topic per Refresh, whatever it holds.
	Refresh time.Duration
	// MaxSchemas bounds the compiled schemas kept (default
	// DefaultMaxSchemas); past it one is dropped (and read again when
	// needed).
	MaxSchemas int
	Logger     *slog.Logger // nil: slog.Default()
	Metrics    *Metrics     // nil: none
}

func (o Options) withDefaults() Options {
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.MaxSchemas <= 0 {
		o.MaxSchemas = DefaultMaxSchemas
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// source is where a Cache reads contracts: a store, or a directory.
type source interface {
	List(ctx context.Context, prefix, startAfter string) ([]storage.Object, error)
	Get(ctx context.Context, key string) ([]byte, error)
	String() string
}

// Cache is the registry as the relay and producers use it: an index of
// what is registered (one listing, kept in memory and refreshed), and the
// compiled schemas of the versions met (bounded). Checking an event costs
// map lookups and the validation; it reads the store only the first time a
// registered version is met, and when an event names a version (or, in a
// strict topic, a type) the index lacks, at most once per Options.Refresh
// per registered type or strict topic. It is safe for concurrent use.
type Cache struct {
	src source
	o   Options

	mu       sync.Mutex
	idx      *listing
	topics   map[string]*topicState
	schemas  map[string]*Schema // by key
	relisted map[subjectKey]time.Time
	sighted  map[subjectKey]struct{} // classified once (personal.go)
	gen      atomic.Uint64
	none     atomic.Bool // loaded, and the registry holds nothing
	static   bool
}

type topicState struct {
	policy   Policy
	obj      storage.Object // the policy object it was read from
	subjects int
}

// New returns a cache of store's registry. Nothing is read until the first
// Check or Load; Run keeps it fresh.
func New(store storage.Store, o Options) *Cache {
	return &Cache{src: store, o: o.withDefaults(), schemas: map[string]*Schema{}, relisted: map[subjectKey]time.Time{}}
}

// Load reads the registry's index now (the first Check would).
func (c *Cache) Load(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadLocked(ctx)
}

func (c *Cache) loadLocked(ctx context.Context) error {
	if c.idx != nil {
		return nil
	}
	return c.refreshLocked(ctx, catalog.Prefix+"contracts/", true)
}

// Generation changes whenever the cache's view of the registry does.
func (c *Cache) Generation() uint64 { return c.gen.Load() }

// Unmarked reports, without taking the cache's lock, that the registry
// holds no contract and no topic policy, and the Generation that answer
// holds for. While the generation stays, Classify answers nil and
// PseudonymizeKey false for every (topic, type) classified once (its first
// sight listed its folder): a caller that classified a type may skip it
// until then (the relay does, per topic; two locked lookups per event cost
// a relay without contracts 3-4% of its CPU).
func (c *Cache) Unmarked() (gen uint64, ok bool) {
	gen = c.gen.Load()
	// refreshLocked stores none before it moves gen: a none read between
	// two equal generations is that generation's.
	if !c.none.Load() || c.gen.Load() != gen {
		return 0, false
	}
	return gen, true
}

// Run lists the registry every Options.Poll until ctx ends. A failed poll
// is logged and retried at the next one; the cache keeps what it knew.
func (c *Cache) Run(ctx context.Context) {
	if c.o.Poll < 0 || c.static {
		return
	}
	t := time.NewTicker(c.o.Poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		err := c.refreshLocked(ctx, catalog.Prefix+"contracts/", false)
		c.mu.Unlock()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			c.o.Logger.Warn("contracts: cannot read the registry; checking events against what was read before, retrying at the next poll", "store", c.src.String(), "err", err)
			failing = true
		case err == nil && failing:
			c.o.Logger.Info("contracts: registry readable again", "store", c.src.String())
			failing = false
		}
	}
}

// Check checks one event against its contract: nil when it passes (valid,
// or of a type without contracts in a topic that is not strict), else the
// Violation. An error means the registry could not be read: the event is
// neither passed nor refused.
func (c *Cache) Check(ctx context.Context, topic, typ string, version int32, payload []byte) (*Violation, error) {
	if c.none.Load() {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(ctx); err != nil {
		return nil, err
	}
	ts := c.topics[topic]
	if ts == nil {
		return nil, nil // no contract and no policy in this topic
	}
	// topic and typ may alias a receive buffer (outbox.View): whatever
	// outlives this call (a key kept, a violation, a metric label) is a
	// copy, or the index's own string.
	k := subjectKey{topic, typ}
	sub := c.idx.subjects[k]
	if sub == nil && ts.policy.Strict && c.due(subjectKey{topic: strings.Clone(topic)}) {
		if err := c.refreshLocked(ctx, catalog.Prefix+"contracts/"+topic+"/", false); err != nil {
			return nil, err
		}
		sub = c.idx.subjects[k]
	}
	if sub == nil {
		if !ts.policy.Strict {
			return nil, nil
		}
		v := &Violation{Topic: strings.Clone(topic), Type: strings.Clone(typ), Version: version, Problem: NoContract}
		c.o.Metrics.rejected(v, false)
		return v, nil
	}
	k = sub.key // the index's own strings
	obj, ok := sub.objs[version]
	if !ok && c.due(k) {
		seg, _ := catalog.EncodeType(typ) // typ has contracts: it encodes
		if err := c.refreshLocked(ctx, catalog.Prefix+"contracts/"+topic+"/"+seg+"/", false); err != nil {
			return nil, err
		}
		if sub = c.idx.subjects[k]; sub != nil {
			obj, ok = sub.objs[version]
		}
	}
	if !ok {
		v := &Violation{Topic: k.topic, Type: k.typ, Version: version, Problem: Unregistered}
		if sub != nil {
			for _, x := range sub.versions {
				v.Registered = append(v.Registered, x.Version)
			}
		}
		c.o.Metrics.rejected(v, true)
		return v, nil
	}
	s, err := c.schemaLocked(ctx, obj, k.topic, k.typ, version)
	if err != nil {
		return nil, err
	}
	if v := s.Validate(payload); v != nil {
		c.o.Metrics.rejected(v, true)
		return v, nil
	}
	return nil, nil
}

// ValidateEvent is Check as outbox.Contracts wants it: nil, a *Violation,
// or an error reading the registry.
func (c *Cache) ValidateEvent(ctx context.Context, topic, typ string, version int32, payload []byte) error {
	v, err := c.Check(ctx, topic, typ, version, payload)
	if err != nil {
		return err
	}
	if v != nil {
		return v
	}
	return nil
}

// Policy returns a topic's policy as the cache knows it.
func (c *Cache) Policy(topic string) Policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts := c.topics[topic]; ts != nil {
		return ts.policy
	}
	return Policy{}
}

// Schema returns the compiled contract of a version, ok=false when it is
// not registered.
func (c *Cache) Schema(ctx context.Context, topic, typ string, version int32) (*Schema, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(ctx); err != nil {
		return nil, false, err
	}
	sub := c.idx.subjects[subjectKey{topic, typ}]
	if sub == nil {
		return nil, false, nil
	}
	obj, ok := sub.objs[version]
	if !ok {
		return nil, false, nil
	}
	s, err := c.schemaLocked(ctx, obj, sub.key.topic, sub.key.typ, version)
	return s, err == nil, err
}

// due reports whether the key may be re-read now, and notes that it is.
func (c *Cache) due(k subjectKey) bool {
	if c.static {
		return false
	}
	now := time.Now()
	if last, ok := c.relisted[k]; ok && now.Sub(last) < c.o.Refresh {
		return false
	}
	c.relisted[k] = now
	return true
}

// legacyNoted holds the stores whose operator was told, once per process
// (a relay holds more than one Cache of its store), that schemas
// registered without $schema before drafts were recorded are read as
// 2020-12.
var legacyNoted sync.Map

// told reports whether store's operator was told already, and notes that
// they are now.
func told(store string) bool {
	_, was := legacyNoted.LoadOrStore(store, true)
	return was
}

func (c *Cache) schemaLocked(ctx context.Context, obj storage.Object, topic, typ string, version int32) (*Schema, error) {
	if s := c.schemas[obj.Key]; s != nil {
		return s, nil
	}
	if obj.Size > MaxSchemaBytes {
		return nil, fmt.Errorf("contract %s/%s v%d in %s is %d bytes, over the limit of %d: it was not registered by `relay contract register`; move it away",
			topic, typ, version, c.src, obj.Size, MaxSchemaBytes)
	}
	raw, err := c.src.Get(ctx, obj.Key)
	if err != nil {
		return nil, fmt.Errorf("read contract %s/%s v%d: %w", topic, typ, version, err)
	}
	s, err := compileStored(topic, typ, version, raw)
	if err != nil {
		return nil, fmt.Errorf("contract %s/%s v%d in %s cannot be used (%v): it was not registered by `relay contract register`; move it away", topic, typ, version, c.src, err)
	}
	if s.Legacy && !told(c.src.String()) {
		c.o.Logger.Info("contracts: a registered schema without $schema is read as JSON Schema draft 2020-12, as when it was registered; "+
			"schemas registered from now on without $schema are read as draft-07, as Confluent Schema Registry reads them "+
			"(relay contract register --draft 2020-12 keeps 2020-12; relay contract show names each version's draft)",
			"topic", topic, "type", typ, "version", version)
	}
	if len(c.schemas) >= c.o.MaxSchemas {
		for k := range c.schemas { // drop any one: a bound, not a policy
			delete(c.schemas, k)
			break
		}
	}
	c.schemas[obj.Key] = s
	return s, nil
}

// refreshLocked lists prefix (the whole registry, a topic's folder or a
// type's) and replaces what the index holds under it with what it shows.
func (c *Cache) refreshLocked(ctx context.Context, prefix string, first bool) error {
	objs, err := c.src.List(ctx, prefix, "")
	if err != nil {
		return fmt.Errorf("list contracts in %s: %w", c.src, err)
	}
	fresh := buildIndex(objs)
	next := &listing{subjects: map[subjectKey]*listed{}, policies: map[string]storage.Object{}}
	changed := c.idx == nil
	if c.idx != nil {
		for k, s := range c.idx.subjects {
			switch f := fresh.subjects[k]; {
			case !underPrefix(prefix, k):
				next.subjects[k] = s
			case f == nil:
				changed = true // removed from the store by hand
			}
		}
		for t, o := range c.idx.policies {
			if !policyUnder(prefix, t) {
				next.policies[t] = o
			} else if _, ok := fresh.policies[t]; !ok {
				changed = true
			}
		}
	}
	for k, s := range fresh.subjects {
		var old *listed
		if c.idx != nil {
			old = c.idx.subjects[k]
		}
		if !sameVersions(old, s) {
			changed = true
			if !first {
				c.noteNewVersions(k, old, s)
			}
		}
		next.subjects[k] = s
	}
	for t, o := range fresh.policies {
		next.policies[t] = o
	}
	topics, pchanged, err := c.readPolicies(ctx, next)
	if err != nil {
		if first {
			return err
		}
		c.o.Logger.Warn("contracts: a topic policy cannot be read; keeping the one read before", "err", err)
	}
	if !changed && !pchanged {
		return nil
	}
	for k, s := range c.schemas {
		if !stillListed(next, k, s) {
			delete(c.schemas, k)
		}
	}
	c.idx, c.topics = next, topics
	c.none.Store(len(next.subjects) == 0 && len(topics) == 0)
	c.gen.Add(1)
	return nil
}

// underPrefix reports whether a listing of prefix shows type k's objects.
func underPrefix(prefix string, k subjectKey) bool {
	base := catalog.Prefix + "contracts/"
	if prefix == base || prefix == base+k.topic+"/" {
		return true
	}
	seg, err := catalog.EncodeType(k.typ)
	return err == nil && prefix == base+k.topic+"/"+seg+"/"
}

// policyUnder reports whether a listing of prefix shows topic t's policy.
func policyUnder(prefix, t string) bool {
	base := catalog.Prefix + "contracts/"
	return prefix == base || prefix == base+t+"/"
}

func sameVersions(a, b *listed) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.objs) != len(b.objs) || a.modeKey != b.modeKey {
		return false
	}
	for v, o := range a.objs {
		if p, ok := b.objs[v]; !ok || p.Key != o.Key || p.Size != o.Size {
			return false
		}
	}
	return true
}

func (c *Cache) noteNewVersions(k subjectKey, old, s *listed) {
	for _, v := range s.versions {
		if old != nil {
			if _, ok := old.objs[v.Version]; ok {
				continue
			}
		}
		c.o.Metrics.versionSeen(k.topic, k.typ)
		c.o.Logger.Info("contracts: new contract version registered", "topic", k.topic, "type", k.typ, "version", v.Version)
	}
}

// stillListed reports whether a compiled schema's object is still listed
// with the same size (a version is immutable, but a store can be edited).
func stillListed(l *listing, key string, s *Schema) bool {
	sub := l.subjects[subjectKey{s.Topic, s.Type}]
	if sub == nil {
		return false
	}
	o, ok := sub.objs[s.Version]
	return ok && o.Key == key && o.Size == int64(len(s.raw))
}

// readPolicies builds the topic states of l, reading the policy objects
// that changed since the last read.
func (c *Cache) readPolicies(ctx context.Context, l *listing) (map[string]*topicState, bool, error) {
	out := map[string]*topicState{}
	changed := false
	var errs []error
	for t, o := range l.policies {
		ts := &topicState{obj: o}
		if old := c.topics[t]; old != nil && old.obj == o {
			ts.policy = old.policy
		} else {
			changed = true
			b, err := c.src.Get(ctx, o.Key)
			if err == nil {
				if err = json.Unmarshal(b, &ts.policy); err == nil {
					err = CheckPolicy(ts.policy)
				}
			}
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				errs = append(errs, fmt.Errorf("policy of topic %q (%s): %w", t, o.Key, err))
				if old != nil {
					ts.policy = old.policy
				}
			}
		}
		out[t] = ts
	}
	for k := range l.subjects {
		ts := out[k.topic]
		if ts == nil {
			ts = &topicState{}
			out[k.topic] = ts
		}
		ts.subjects++
	}
	if len(out) != len(c.topics) {
		changed = true
	}
	return out, changed, errors.Join(errs...)
}
