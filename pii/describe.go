package pii

import (
	"context"
	"sync/atomic"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
)

// Classifications is what the topic description needs from a source of
// classifications: every classified contract and the topics whose key is
// pseudonymised. classify.Static (--pii-schemas) is one; the contract
// registry will be the other (DESIGN.md, personal data).
type Classifications interface {
	Contracts() []classify.Contract
	PseudonymizeKey(topic string) bool
}

// Columns is the topicmeta.Provider of personal columns: for a topic, each
// personal leaf its contracts mark (column "payload", the leaf's JSON
// pointer, "*" for every element or member) per event type and version,
// and the key column when the topic pseudonymises it. It lists where
// personal data is, never a value. Register it once; Set swaps the
// classifications a command read.
type Columns struct {
	cls atomic.Pointer[classifications]
}

type classifications struct{ Classifications }

// Set makes c the classifications Describe reads (nil: none).
func (p *Columns) Set(c Classifications) {
	if c == nil {
		p.cls.Store(nil)
		return
	}
	p.cls.Store(&classifications{c})
}

// Describe implements topicmeta.Provider.
func (p *Columns) Describe(_ context.Context, _ storage.Store, in *topicmeta.Info) error {
	in.PersonalColumns = PersonalColumns(p.current(), in.Topic)
	return nil
}

func (p *Columns) current() Classifications {
	if c := p.cls.Load(); c != nil {
		return c.Classifications
	}
	return nil
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
