package pii

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
)

// Classifications is what the topic description needs from a source of
// classifications: every classified contract and the topics whose key is
// pseudonymised. classify.Static is one (--pii-schemas, and what the
// contract registry's Classifications returns).
type Classifications interface {
	Contracts() []classify.Contract
	PseudonymizeKey(topic string) bool
}

// Columns is the topicmeta.Provider of personal columns: for a topic, each
// personal leaf its contracts mark (column "payload", the leaf's JSON
// pointer, "*" for every element or member) per event type and version,
// and the key column when the topic pseudonymises it. It lists where
// personal data is, never a value. Register it once. Its classifications
// are the registry's of the store Describe is given (through Registry),
// unless Set gave others (a command's --pii-schemas).
type Columns struct {
	// Registry opens the contract registry of a store (contract.New), once
	// per store; nil: only what Set gave is listed.
	Registry func(storage.Store) Registry

	cls atomic.Pointer[classifications]

	mu   sync.Mutex
	memo map[string]memoized // by store, for memoTTL
}

type classifications struct{ Classifications }

// memoized is one store's registry, opened once (so its schemas are read
// and compiled once), and its last reading.
type memoized struct {
	reg Registry
	cls Classifications
	at  time.Time
}

// memoTTL is how long one reading of a registry serves Describe: a command
// describing every topic lists the registry once, not once per topic.
const memoTTL = 5 * time.Second

// Set makes c the classifications Describe reads instead of the registry
// (nil: the registry's, read afresh).
func (p *Columns) Set(c Classifications) {
	p.mu.Lock()
	for k, m := range p.memo {
		m.cls = nil // read again; the opened registry stays
		p.memo[k] = m
	}
	p.mu.Unlock()
	if c == nil {
		p.cls.Store(nil)
		return
	}
	p.cls.Store(&classifications{c})
}

// Describe implements topicmeta.Provider.
func (p *Columns) Describe(ctx context.Context, store storage.Store, in *topicmeta.Info) error {
	c, err := p.current(ctx, store)
	if err != nil {
		return fmt.Errorf("personal columns of topic %s: %w", in.Topic, err)
	}
	in.PersonalColumns = PersonalColumns(c, in.Topic)
	return nil
}

func (p *Columns) current(ctx context.Context, store storage.Store) (Classifications, error) {
	if c := p.cls.Load(); c != nil {
		return c.Classifications, nil
	}
	if p.Registry == nil || store == nil {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key := store.String()
	m, ok := p.memo[key]
	if ok && m.cls != nil && time.Since(m.at) < memoTTL {
		return m.cls, nil
	}
	if !ok {
		m.reg = p.Registry(store)
	}
	cls, err := m.reg.Classifications(ctx)
	if err != nil {
		return nil, err
	}
	if p.memo == nil || len(p.memo) > 16 {
		p.memo = map[string]memoized{}
	}
	m.cls, m.at = cls, time.Now()
	p.memo[key] = m
	return cls, nil
}

// PersonalColumns lists the topic's personal columns c knows of: the
// pseudonymised key first (Type empty: every event), then each contract's
// personal leaves in (type, version, pointer) order. It returns nil when
// there are none, which topicmeta shows as "none".
func PersonalColumns(c Classifications, topic string) []topicmeta.PersonalColumn {
	if c == nil {
		return nil
	}
	var out []topicmeta.PersonalColumn
	if c.PseudonymizeKey(topic) {
		out = append(out, topicmeta.PersonalColumn{Column: "key"})
	}
	for _, k := range c.Contracts() {
		if k.Topic != topic {
			continue
		}
		for _, path := range k.Personal {
			out = append(out, topicmeta.PersonalColumn{Type: k.Type, Version: int(k.Version), Column: "payload", Pointer: path.String()})
		}
	}
	return out
}
