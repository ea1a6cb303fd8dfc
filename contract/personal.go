package contract

import (
	"context"
	"fmt"
	"strings"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/pii/classify"
)

// maxFirstSights bounds the (topic, type) pairs a Cache re-reads the first
// time it classifies one of their events: past it, a type without
// contracts waits for the next poll. Types come from rows anyone can
// write: the bound caps what they can make the relay list.
const maxFirstSights = 10_000

// Classify implements classify.Classifier over the registry: what the
// contract of (topic, typ, version) marks as personal data (nil: nothing
// or no contract). A type with contracts but not this version is
// classify.ErrUnknownVersion when any of its versions marks personal data.
//
// A contract registered while the relay runs is seen at once for a type
// the cache has not classified before (its folder is listed the first
// time, at most maxFirstSights types), for a version not yet seen of a
// type with contracts (at most once per Options.Refresh), and otherwise at
// the next poll (Options.Poll): register a type's contract before its
// producers publish it.
func (c *Cache) Classify(ctx context.Context, topic, typ string, version int32) (*classify.Classification, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(ctx); err != nil {
		return nil, err
	}
	k := subjectKey{topic, typ}
	sub := c.idx.subjects[k]
	if sub == nil {
		if !c.firstSight(k) {
			return nil, nil
		}
		if err := c.refreshTypeLocked(ctx, topic, typ); err != nil {
			return nil, err
		}
		if sub = c.idx.subjects[k]; sub == nil {
			return nil, nil
		}
	}
	obj, ok := sub.objs[version]
	if !ok && c.due(sub.key) {
		if err := c.refreshTypeLocked(ctx, topic, typ); err != nil {
			return nil, err
		}
		if sub = c.idx.subjects[k]; sub == nil {
			return nil, nil
		}
		obj, ok = sub.objs[version]
	}
	if ok {
		s, err := c.schemaLocked(ctx, obj, sub.key.topic, sub.key.typ, version)
		if err != nil {
			return nil, err
		}
		return s.personal, nil
	}
	for _, v := range sub.versions {
		s, err := c.schemaLocked(ctx, sub.objs[v.Version], sub.key.topic, sub.key.typ, v.Version)
		if err != nil {
			return nil, err
		}
		if s.personal.HasPersonal() {
			return nil, fmt.Errorf("topic %q type %q version %d (registered: %d to %d): %w",
				sub.key.topic, sub.key.typ, version, sub.versions[0].Version, sub.versions[len(sub.versions)-1].Version, classify.ErrUnknownVersion)
		}
	}
	return nil, nil
}

// PseudonymizeKey implements classify.Classifier: the topic's policy
// (relay contract policy --pseudonymize-key).
func (c *Cache) PseudonymizeKey(topic string) bool {
	if c.none.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.topics[topic]
	return ts != nil && ts.policy.PseudonymizeKey
}

// Classifications lists the registry again and returns the classification
// of every registered version and the topics that pseudonymise their keys:
// what the relay checks at start (a KEK is needed), and what topic
// descriptions list as personal columns. It reads every contract once.
func (c *Cache) Classifications(ctx context.Context) (*classify.Static, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	base := catalog.Prefix + "contracts/"
	if c.idx == nil {
		if err := c.loadLocked(ctx); err != nil {
			return nil, err
		}
	} else if !c.static {
		if err := c.refreshLocked(ctx, base, false); err != nil {
			return nil, err
		}
	}
	out := classify.NewStatic()
	for _, sub := range c.idx.subjects {
		for _, v := range sub.versions {
			s, err := c.schemaLocked(ctx, sub.objs[v.Version], sub.key.topic, sub.key.typ, v.Version)
			if err != nil {
				return nil, err
			}
			out.Add(sub.key.topic, sub.key.typ, v.Version, s.personal)
		}
	}
	for t, ts := range c.topics {
		if ts.policy.PseudonymizeKey {
			out.SetPseudonymizeKey(t)
		}
	}
	return out, nil
}

// firstSight reports whether k is classified for the first time (and
// notes it, within maxFirstSights).
func (c *Cache) firstSight(k subjectKey) bool {
	if c.static || len(c.sighted) >= maxFirstSights {
		return false
	}
	if c.sighted == nil {
		c.sighted = map[subjectKey]struct{}{}
	}
	if _, ok := c.sighted[k]; ok {
		return false
	}
	c.sighted[subjectKey{strings.Clone(k.topic), strings.Clone(k.typ)}] = struct{}{}
	return true
}

// refreshTypeLocked lists one type's folder. A topic or type that cannot
// be a folder name cannot have contracts: nothing is listed.
func (c *Cache) refreshTypeLocked(ctx context.Context, topic, typ string) error {
	seg, err := catalog.EncodeType(typ)
	if err != nil || catalog.CheckName("topic", topic) != nil {
		return nil
	}
	return c.refreshLocked(ctx, catalog.Prefix+"contracts/"+topic+"/"+seg+"/", false)
}

// Rules of personalDiffs, beside compat's Confluent rules.
const (
	RulePersonalMarkRemoved   = "PERSONAL_MARK_REMOVED"
	RuleSubjectPointerChanged = "SUBJECT_POINTER_CHANGED"
)

// personalDiffs is the registry's own rule, whatever the compatibility
// mode: a new version keeps every personal mark of the latest one and its
// subject pointer. Dropping a mark would write a field in clear that
// consumers and erasure treat as personal; moving the pointer would put a
// subject's fields under another subject's key.
func personalDiffs(latest, next *classify.Classification) []compat.Difference {
	if !latest.HasPersonal() {
		return nil
	}
	var out []compat.Difference
	if next == nil || next.SubjectPointer != latest.SubjectPointer {
		nw := ""
		if next != nil {
			nw = next.SubjectPointer
		}
		out = append(out, compat.Difference{Pointer: "#/" + classify.SubjectKeyword, Rule: RuleSubjectPointerChanged,
			Old: quote(latest.SubjectPointer), New: quote(nw)})
	}
	for _, p := range latest.Personal {
		if next == nil || !next.Covers(p) {
			out = append(out, compat.Difference{Pointer: p.String(), Rule: RulePersonalMarkRemoved, Old: `"personal"`, New: `"not personal"`})
		}
	}
	return out
}

func quote(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}

// mustClassify is classify.Parse of a schema Compile has accepted (so it
// parses; a registered one was accepted when registered).
func mustClassify(raw []byte) *classify.Classification {
	c, _ := classify.Parse(raw)
	return c
}
