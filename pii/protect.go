package pii

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
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
	keys     *keys.Store // nil: no KEK configured (noKEK)
	patterns patterns
}

// NewProtector returns a Protector over cls's classifications and the key
// table ks. ks may be nil (no KEK configured): an event that needs a key
// then fails with ErrNoKEK, so it waits and is never written in clear.
func NewProtector(cls classify.Classifier, ks *keys.Store) (*Protector, error) {
	if cls == nil {
		return nil, errors.New("pii: no classifier")
	}
	return &Protector{cls: cls, keys: ks}, nil
}

// Scratch is the reusable work space of one caller of Protector.Event
// (one goroutine): it makes protecting an event allocate next to nothing.
type Scratch struct {
	buf []byte // the rewritten payload: ev.Payload aliases it
	ad  []byte
	sc  scanner
	// keys caches, without locks, the data keys this caller used lately
	// (by topic and subject id); dropped when the key store's generation
	// moves (an erasure), when full, and every scratchTTL.
	keys    map[scratchKey]scratchSealer
	gen     uint64
	resetAt time.Time
	calls   int
}

type scratchKey struct{ topic, subject string }

// scratchSealer is a cached key: it seals values written at or after
// erasedAt only (the subject's latest erasure when it was read).
type scratchSealer struct {
	envelope.Sealer
	erasedAt time.Time
}

// Bounds of a Scratch's key cache: far below the key store's own, whose
// TTL and erasure records still apply within scratchTTL.
const (
	scratchKeys = 4096
	scratchTTL  = 10 * time.Second
)

// key returns the sealer of the subject's values in topic (its data key)
// for an event written at written; keys.ErrErased (wrapped) when the
// subject was erased after it.
func (p *Protector) key(ctx context.Context, sc *Scratch, topic string, subject []byte, written time.Time) (envelope.Sealer, error) {
	if sc.calls++; sc.keys == nil || sc.calls&1023 == 0 && time.Now().After(sc.resetAt) || sc.gen != p.keys.Generation() || len(sc.keys) >= scratchKeys {
		sc.keys, sc.gen, sc.resetAt = make(map[scratchKey]scratchSealer), p.keys.Generation(), time.Now().Add(scratchTTL)
	}
	if s, ok := sc.keys[scratchKey{topic, unsafe.String(unsafe.SliceData(subject), len(subject))}]; ok && !written.Before(s.erasedAt) {
		return s.Sealer, nil
	}
	sub, err := p.keys.SubjectHash(subject)
	if err != nil {
		return envelope.Sealer{}, err
	}
	a, erasedAt, err := p.keys.SealKey(ctx, topic, sub, written)
	if err != nil {
		return envelope.Sealer{}, fmt.Errorf("topic %q: the key of a data subject: %w", topic, err)
	}
	s := scratchSealer{envelope.NewSealer(a, sub), erasedAt}
	sc.keys[scratchKey{topic, string(subject)}] = s
	return s.Sealer, nil
}

// Unmarked reports that the classifier marks nothing (a contract registry
// holding no contract and no policy: contract.Cache.Unmarked), and the
// generation of its answer: while it stays, Event of a (topic, type)
// already passed to it leaves the event as it is and returns nil, so a
// caller may skip it. ok is false when the classifier cannot tell.
func (p *Protector) Unmarked() (gen uint64, ok bool) {
	if u, is := p.cls.(interface{ Unmarked() (uint64, bool) }); is {
		return u.Unmarked()
	}
	return 0, false
}

// Event protects ev in place: its payload's personal leaves become
// envelopes and, on topics that ask for it, its key a keyed hash. A
// rewritten ev.Payload aliases sc, so it is valid until sc is passed again
// (a sink's Append copies it). When ev cannot be protected it returns the
// dead letter to write instead (ev must then not be written). err is
// non-nil only when a key cannot be had: retry later.
//
// ev may be an outbox.View: Event replaces fields, never writes into them.
func (p *Protector) Event(ctx context.Context, ev *outbox.Event, sc *Scratch) (dl *outbox.DeadLetter, err error) {
	c, cerr := p.cls.Classify(ctx, ev.Topic, ev.Type, ev.SchemaVersion)
	switch {
	case errors.Is(cerr, classify.ErrUnknownVersion):
		return p.deadLetter(ev, cerr.Error(), Redacted), nil
	case cerr != nil:
		return nil, fmt.Errorf("classify topic %q type %q version %d: %w", ev.Topic, ev.Type, ev.SchemaVersion, cerr)
	}
	if p.cls.PseudonymizeKey(ev.Topic) {
		if p.keys == nil {
			return nil, noKEK(keyTopicText(ev.Topic))
		}
		if ev.Key, err = p.keys.PseudonymizeKey(ev.Topic, ev.Key); err != nil {
			return nil, err
		}
	}
	if !c.HasPersonal() {
		return nil, nil
	}
	payload := readOnly(ev.Payload) // read, never written: the result is built anew
	f, serr := sc.sc.scan(payload, p.patterns.get(c).all)
	switch {
	case serr != nil:
		return p.deadLetter(ev, fmt.Sprintf("topic %q type %q version %d: payload is not JSON, and its contract marks personal data", ev.Topic, ev.Type, ev.SchemaVersion), Redacted), nil
	case f.subjects == 0 || (f.subject == nil && f.badKind == ""):
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found nothing in the payload", c.SubjectPointer)), nil
	case f.badKind != "":
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found %s, not a string or number", c.SubjectPointer, f.badKind)), nil
	case f.subjects > 1:
		return p.redact(ev, payload, f, fmt.Sprintf("subject pointer %s found %d values", c.SubjectPointer, f.subjects)), nil
	}
	if len(f.spans) == 0 {
		return nil, nil
	}
	if p.keys == nil {
		return nil, noKEK(contractText(ev.Topic, ev.Type, ev.SchemaVersion))
	}
	sealer, err := p.key(ctx, sc, ev.Topic, f.subject, written(ev))
	if errors.Is(err, keys.ErrErased) {
		// Written before its subject's erasure, relayed after it: its
		// personal fields are gone with the key they would have had.
		ev.Payload = redactSpans(payload, f.spans)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	buf := sc.buf[:0]
	last := 0
	for _, sp := range f.spans {
		buf = append(buf, payload[last:sp.start]...)
		sc.ad = envelope.AssociatedData(sc.ad[:0], ev.Topic, ev.ID, sp.pointer)
		if buf, err = sealer.Seal(buf, payload[sp.start:sp.end], sc.ad); err != nil {
			return nil, err
		}
		last = sp.end
	}
	buf = append(buf, payload[last:]...)
	sc.buf = buf
	ev.Payload = unsafe.String(unsafe.SliceData(buf), len(buf))
	return nil, nil
}

// written is when ev was written, as the erasures compare it: the earlier
// of its occurred_at and its commit time (a snapshot's rows carry the
// snapshot's time as commit time, their occurred_at says when).
func written(ev *outbox.Event) time.Time {
	if !ev.OccurredAt.IsZero() && (ev.CommitTime.IsZero() || ev.OccurredAt.Before(ev.CommitTime)) {
		return ev.OccurredAt
	}
	return ev.CommitTime
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
func (p *Protector) DeadLetter(ctx context.Context, dl *outbox.DeadLetter) error {
	if dl.Topic == "" || outbox.ValidTopic(dl.Topic) != nil {
		return nil // no topic, no contract: nothing says it is personal
	}
	c, cerr := p.cls.Classify(ctx, dl.Topic, dl.Type, dl.SchemaVersion)
	if cerr != nil && !errors.Is(cerr, classify.ErrUnknownVersion) {
		return fmt.Errorf("classify topic %q type %q version %d: %w", dl.Topic, dl.Type, dl.SchemaVersion, cerr)
	}
	pseudo := p.cls.PseudonymizeKey(dl.Topic)
	if cerr == nil && !c.HasPersonal() && !pseudo {
		return nil
	}
	if pseudo && dl.Key != "" {
		if p.keys == nil {
			return noKEK(keyTopicText(dl.Topic))
		}
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
		if f, err := scan(readOnly(dl.Payload), p.patterns.get(c).all); err != nil {
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
