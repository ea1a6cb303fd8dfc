// Package topicmeta describes topics for the people who find and own them:
// what `relay topics` prints, the operator's page shows and `relay catalog
// sync` registers in Unity Catalog. A topic's Info joins what the operator
// said (owner, description: catalog.TopicMeta, set by `relay topics
// describe`), what its Delta table says (version, records, last commit,
// retention, columns, and the relays whose txn it holds, with their
// markers: its sources) and what other features know about it (contract
// versions and personal columns), which they add through a Provider.
//
// Apply writes the description and column comments into the table's own
// metaData (metaData.description, and "comment" in each field's metadata)
// so that every Delta reader sees them. That commit changes no column's
// structure, which is exactly what a live relay's writer accepts from
// another writer (sink/delta's SameSchema leaves comments out): the relay
// streams on through it.
package topicmeta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Info is everything known about one topic. Slices a feature has not
// filled are nil, which every view shows as "none".
type Info struct {
	Topic       string    `json:"topic"`
	Owner       string    `json:"owner,omitempty"`
	Description string    `json:"description,omitempty"`
	Described   time.Time `json:"described,omitzero"` // when `relay topics describe` last set them

	Location      string    `json:"location"` // the table's URL
	Version       int64     `json:"version"`  // -1: no table
	Records       int64     `json:"records"`
	LastCommit    time.Time `json:"lastCommit,omitzero"`
	LogRetention  string    `json:"logRetention,omitempty"`  // delta.logRetentionDuration (or its default)
	FileRetention string    `json:"fileRetention,omitempty"` // delta.deletedFileRetentionDuration (or its default)
	Columns       []Column  `json:"columns,omitempty"`
	Sources       []Source  `json:"sources"`

	// Contracts and PersonalColumns come from the contracts and personal
	// data features (Provider); nil until one fills them.
	Contracts       []Contract       `json:"contracts"`
	PersonalColumns []PersonalColumn `json:"personalColumns"`

	// Problem says why part of the Info could not be read (a missing or
	// unreadable table, a provider's error).
	Problem string `json:"problem,omitempty"`

	schemaString     string  // the table's, for Apply and Unity Catalog
	tableDescription *string // the table's metaData.description
}

// SchemaString is the table's schemaString ("" without a table).
func (in *Info) SchemaString() string { return in.schemaString }

// Column is one column of the topic's table.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // delta.TypeString
	Nullable bool   `json:"nullable"`
	Comment  string `json:"comment,omitempty"`
}

// Source is one relay that commits to the topic: its txn appId in the
// table's log, with what its marker says about its source database.
type Source struct {
	AppID    string `json:"appId"`
	Slot     string `json:"slot,omitempty"`
	Database string `json:"database,omitempty"`
	SystemID string `json:"systemId,omitempty"`
	TxnLSN   string `json:"txnLsn"` // its last committed source position
}

// Contract is the registered versions of one event type of the topic.
type Contract struct {
	Type          string `json:"type"`
	Versions      []int  `json:"versions"`
	Compatibility string `json:"compatibility,omitempty"`
}

// PersonalColumn is a field a contract marks as personal data. Type ""
// is a whole column of every event: the key of a topic that stores it as
// a keyed hash.
type PersonalColumn struct {
	Type    string `json:"type,omitempty"`
	Version int    `json:"version,omitempty"`
	Column  string `json:"column"`  // the table column holding it, e.g. "payload"
	Pointer string `json:"pointer"` // JSON pointer within it, e.g. "/customer/email"
}

// Provider adds what a feature knows about a topic to its Info: the
// contracts feature fills Contracts, the personal data feature
// PersonalColumns. Describe must only read.
type Provider interface {
	Describe(ctx context.Context, store storage.Store, info *Info) error
}

var (
	providersMu sync.Mutex
	providers   []Provider
)

// Register adds a Provider to every later Load. Features register theirs
// from the command's wiring (cmd/relay), once.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers = append(providers, p)
}

func registered() []Provider {
	providersMu.Lock()
	defer providersMu.Unlock()
	return append([]Provider(nil), providers...)
}

// Load describes every registered topic (catalog.ListTopics) and every
// described one (a topic may be described before its first event), sorted.
func Load(ctx context.Context, store storage.Store) ([]Info, error) {
	names, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return nil, err
	}
	described, err := catalog.ListDescribed(ctx, store)
	if err != nil {
		return nil, err
	}
	names = append(names, described...)
	sort.Strings(names)
	names = slices.Compact(names)
	markers, err := markersByApp(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(names))
	for _, n := range names {
		in, err := load(ctx, store, n, markers)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// LoadTopic describes one topic, registered or not (its table may not
// exist yet: Version -1).
func LoadTopic(ctx context.Context, store storage.Store, topic string) (Info, error) {
	if err := catalog.CheckName("topic", topic); err != nil {
		return Info{}, err
	}
	markers, err := markersByApp(ctx, store)
	if err != nil {
		return Info{}, err
	}
	return load(ctx, store, topic, markers)
}

func markersByApp(ctx context.Context, store storage.Store) (map[string]catalog.Marker, error) {
	ms, err := catalog.ListMarkers(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make(map[string]catalog.Marker, len(ms))
	for _, m := range ms {
		out[m.AppID] = m
	}
	return out, nil
}

// load returns an error only when the store cannot be read; a table that
// is missing or unreadable is the Info's Problem.
func load(ctx context.Context, store storage.Store, topic string, markers map[string]catalog.Marker) (Info, error) {
	tbl := storage.Sub(store, topic)
	in := Info{Topic: topic, Location: tbl.String(), Version: -1}
	meta, ok, err := catalog.ReadTopicMeta(ctx, store, topic)
	switch {
	case err != nil:
		in.Problem = err.Error()
	case ok:
		in.Owner, in.Description, in.Described = meta.Owner, meta.Description, meta.Updated
	}
	snap, err := delta.LoadSnapshot(ctx, tbl, -1)
	switch {
	case errors.Is(err, delta.ErrNoTable):
		in.Problem = join(in.Problem, "no table yet")
	case err != nil:
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		in.Problem = join(in.Problem, fmt.Sprintf("table unreadable: %v", err))
	default:
		fromSnapshot(&in, snap, markers)
	}
	for _, p := range registered() {
		if err := p.Describe(ctx, store, &in); err != nil {
			if ctx.Err() != nil {
				return in, ctx.Err()
			}
			in.Problem = join(in.Problem, err.Error())
		}
	}
	return in, nil
}

func fromSnapshot(in *Info, snap *delta.Snapshot, markers map[string]catalog.Marker) {
	in.Version, in.Records, in.LastCommit = snap.Version, snap.StatsRecords(), snap.CommitTime
	in.schemaString, in.tableDescription = snap.Metadata.SchemaString, snap.Metadata.Description
	cfg := snap.Metadata.Configuration
	in.LogRetention, in.FileRetention = cfg[delta.PropLogRetention], cfg[delta.PropDeletedFileRetention]
	if in.LogRetention == "" {
		in.LogRetention = "interval 30 days (default)"
	}
	if in.FileRetention == "" {
		in.FileRetention = "interval 7 days (default)"
	}
	if s, err := delta.ParseSchema(snap.Metadata.SchemaString); err == nil {
		for _, f := range s.Fields {
			c, _ := f.Metadata["comment"].(string)
			in.Columns = append(in.Columns, Column{Name: f.Name, Type: delta.TypeString(f.Type), Nullable: f.Nullable, Comment: c})
		}
	}
	in.Sources = []Source{}
	for app, txn := range snap.Txns {
		s := Source{AppID: app, TxnLSN: lsnString(txn.Version)}
		if m, ok := markers[app]; ok {
			s.Slot, s.Database, s.SystemID = m.Slot, m.Database, m.SystemID
		}
		in.Sources = append(in.Sources, s)
	}
	sort.Slice(in.Sources, func(i, j int) bool { return in.Sources[i].AppID < in.Sources[j].AppID })
}

// IsDeadLetter reports whether the topic is the dead-letter topic.
func (in *Info) IsDeadLetter() bool { return in.Topic == outbox.DeadLetterTopic }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func lsnString(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }
