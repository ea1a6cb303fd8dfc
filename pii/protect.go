package pii

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/pii/keys"
)

// Redacted replaces a personal value in a dead letter.
const Redacted = `{"x-deltabus-redacted":1}`

// Protector encrypts the personal leaves of events.
type Protector struct {
	cls      classify.Classifier
	keys     *keys.Store
	matchers sync.Map // *classify.Classification -> *matcher
}

// NewProtector returns a Protector; ks may be nil only when cls marks
// nothing (cls.Any() is false).
func NewProtector(cls classify.Classifier, ks *keys.Store) (*Protector, error) {
	if cls.Any() && ks == nil {
		return nil, errors.New("contracts mark personal data but no key table is open")
	}
	return &Protector{cls: cls, keys: ks}, nil
}

func (p *Protector) matcher(c *classify.Classification) *matcher {
	if m, ok := p.matchers.Load(c); ok {
		return m.(*matcher)
	}
	m, _ := p.matchers.LoadOrStore(c, compile(c))
	return m.(*matcher)
}

// Event protects ev in place: its payload's personal leaves become
// envelopes and, on topics that ask for it, its key a keyed hash. buf is
// scratch space, returned grown for reuse: a rewritten ev.Payload aliases
// it, so it is valid until buf is passed again (a sink's Append copies it). When ev cannot be protected it
// returns the dead letter to write instead (ev must then not be written).
// err is non-nil only when a key cannot be had: retry later.
//
// ev may be an outbox.View: Event replaces fields, never writes into them.
func (p *Protector) Event(ctx context.Context, ev *outbox.Event, buf []byte) (dl *outbox.DeadLetter, out []byte, err error) {
	c, cerr := p.cls.Classify(ev.Topic, ev.Type, ev.SchemaVersion)
	if cerr != nil {
		return p.deadLetter(ev, cerr.Error(), Redacted), buf, nil
	}
	if p.cls.PseudonymizeKey(ev.Topic) {
		if ev.Key, err = p.keys.PseudonymizeKey(ev.Topic, ev.Key); err != nil {
			return nil, buf, err
		}
	}
	if !c.HasPersonal() {
		return nil, buf, nil
	}
	payload := readOnly(ev.Payload) // read, never written: the result is built anew
	f, serr := scan(payload, p.matcher(c))
	switch {
	case serr != nil:
		return p.deadLetter(ev, fmt.Sprintf("topic %q type %q version %d: payload is not JSON, and its contract marks personal data", ev.Topic, ev.Type, ev.SchemaVersion), Redacted), buf, nil
	case f.subjects == 0 || (f.subject == nil && f.badKind == ""):
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found nothing in the payload", c.SubjectPointer)), buf, nil
	case f.badKind != "":
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found %s, not a string or number", c.SubjectPointer, f.badKind)), buf, nil
	case f.subjects > 1:
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found %d values", c.SubjectPointer, f.subjects)), buf, nil
	}
	if len(f.spans) == 0 {
		return nil, buf, nil
	}
	sub, err := p.keys.SubjectHash(f.subject)
	if err != nil {
		return nil, buf, err
	}
	a, err := p.keys.DataKey(ctx, ev.Topic, sub, true)
	if err != nil {
		return nil, buf, fmt.Errorf("topic %q: the key of a data subject: %w", ev.Topic, err)
	}
	buf = buf[:0]
	var ad []byte
	last := 0
	for _, sp := range f.spans {
		buf = append(buf, payload[last:sp.start]...)
		ad = envelope.AssociatedData(ad[:0], ev.Topic, ev.ID, sp.pointer)
		if buf, err = envelope.Seal(buf, a, sub, payload[sp.start:sp.end], ad); err != nil {
			return nil, buf, err
		}
		last = sp.end
	}
	buf = append(buf, payload[last:]...)
	ev.Payload = unsafe.String(unsafe.SliceData(buf), len(buf))
	return nil, buf, nil
}

// redact returns the dead letter of an event whose personal leaves could
// not be encrypted: each is replaced by Redacted.
func (p *Protector) redact(ev *outbox.Event, payload []byte, f found, why string) *outbox.DeadLetter {
	reason := fmt.Sprintf("topic %q type %q version %d: %s; its %d personal fields are redacted (the row stays in the outbox until its retention)",
		ev.Topic, ev.Type, ev.SchemaVersion, why, len(f.spans))
	return p.deadLetter(ev, reason, redactSpans(payload, f.spans))
}

func redactSpans(payload []byte, spans []span) string {
	var sb strings.Builder
	last := 0
	for _, sp := range spans {
		sb.Write(payload[last:sp.start])
		sb.WriteString(Redacted)
		last = sp.end
	}
	sb.Write(payload[last:])
	return sb.String()
}

func (p *Protector) deadLetter(ev *outbox.Event, reason, payload string) *outbox.DeadLetter {
	dl := &outbox.DeadLetter{Event: *ev, Reason: reason}
	dl.ID, dl.Key, dl.Type = strings.Clone(ev.ID), strings.Clone(ev.Key), strings.Clone(ev.Type)
	dl.Payload = payload
	if ev.Headers != nil {
		h := strings.Clone(*ev.Headers)
		dl.Headers = &h
	}
	dl.RawRow = redactedRaw(&dl.Event)
	return dl
}

// redactedRaw is the raw_row of a redacted dead letter: its fields, with
// the redacted payload, instead of the row's columns.
func redactedRaw(ev *outbox.Event) string {
	payload := json.RawMessage(ev.Payload)
	if !json.Valid(payload) {
		payload = json.RawMessage(Redacted)
	}
	b, _ := json.Marshal(map[string]any{"id": ev.ID, "topic": ev.Topic, "key": ev.Key, "type": ev.Type,
		"schema_version": ev.SchemaVersion, "payload": payload, "headers": ev.Headers,
		"occurred_at": ev.OccurredAt, "redacted": true})
	return string(b)
}

// DeadLetter redacts, in place, a dead letter whose topic carries personal
// data: the personal leaves of its payload (the whole payload when they
// cannot be told), its key on topics that pseudonymise keys, and its raw
// row, replaced by the redacted fields. Other dead letters are left alone.
func (p *Protector) DeadLetter(dl *outbox.DeadLetter) error {
	if dl.Topic == "" || outbox.ValidTopic(dl.Topic) != nil {
		return nil // no topic, no contract: nothing says it is personal
	}
	c, cerr := p.cls.Classify(dl.Topic, dl.Type, dl.SchemaVersion)
	pseudo := p.cls.PseudonymizeKey(dl.Topic)
	if cerr == nil && !c.HasPersonal() && !pseudo {
		return nil
	}
	if pseudo && dl.Key != "" {
		k, err := p.keys.PseudonymizeKey(dl.Topic, dl.Key)
		if err != nil {
			return err
		}
		dl.Key = k
	}
	switch {
	case cerr != nil:
		dl.Payload = Redacted
	case c.HasPersonal():
		if f, err := scan(readOnly(dl.Payload), p.matcher(c)); err != nil {
			dl.Payload = Redacted
		} else {
			dl.Payload = redactSpans(readOnly(dl.Payload), f.spans)
		}
	}
	dl.RawRow = redactedRaw(&dl.Event)
	return nil
}

// readOnly returns s's bytes without a copy; they must not be written.
func readOnly(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func containsString(s, sub string) bool { return strings.Contains(s, sub) }
