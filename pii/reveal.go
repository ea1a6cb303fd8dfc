package pii

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/pii/keys"
)

// Revealer decrypts the envelopes of stored payloads for a consumer that
// has the KEK and may read the key table. Safe for concurrent use.
//
// It opens envelopes only where the contract the event was written with
// (its type and schema version) marks personal data: the places the relay
// encrypted. An envelope-shaped object anywhere else is the producer's own
// data and is handed over as it is, never opened. An envelope at a
// personal place that does not open (altered, or copied from another
// event or field) is that field's outcome, not the event's: the field
// reads as null and is listed in Revealed.Unreadable, the event is
// delivered, and Unreadable counts it. So nothing a producer can write
// stops a consumer; only what stops the relay too (the key table or the
// contract registry out of reach) makes Reveal fail, and a retry
// succeeds once it is back.
type Revealer struct {
	keys       *keys.Store
	cls        classify.Classifier
	patterns   patterns
	unreadable atomic.Int64
}

// NewRevealer returns a Revealer over a key table opened read-only and the
// classifier that says where each contract's personal data is (the
// store's contract registry, contract.Cache, or the schemas the relay
// was given, classify.ReadDir).
func NewRevealer(ks *keys.Store, cls classify.Classifier) *Revealer {
	return &Revealer{keys: ks, cls: cls}
}

// Keys returns the key table (to Forget keys at erasure records).
func (r *Revealer) Keys() *keys.Store { return r.keys }

// Unreadable is how many fields Reveal delivered as null because their
// envelope did not open, since r was made.
func (r *Revealer) Unreadable() int64 { return r.unreadable.Load() }

// Instrument reports Unreadable as deltabus_pii_unreadable_fields_total
// through mp.
func (r *Revealer) Instrument(mp metric.MeterProvider) error {
	_, err := mp.Meter("github.com/deltabus/deltabus/pii").Int64ObservableCounter("deltabus_pii_unreadable_fields_total",
		metric.WithDescription("Personal fields delivered as null because their envelope does not open under its key (altered, or copied from another event or field)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(r.unreadable.Load())
			return nil
		}))
	return err
}

// Revealed is a payload as a consumer reads it.
type Revealed struct {
	Payload string
	// Erased are the pointers of the personal fields whose subject is
	// erased (its key deleted, or the event written before the erasure and
	// relayed after it, its fields redacted): they read as null.
	Erased []string
	// Unreadable are the pointers of the personal fields whose envelope
	// does not open under its key: they read as null.
	Unreadable []string
}

var envMarker = `"` + envelope.Marker + `"`

// Reveal returns ev's payload with the envelopes at the personal fields of
// its contract (ev.Topic, ev.Type, ev.SchemaVersion: the version the
// producer wrote, before any upcasting) replaced by their values. A
// payload without envelopes, or of a contract that marks nothing, is
// returned as is, without work. The error is only what the relay would
// wait on too: the classification or a key that cannot be read now.
func (r *Revealer) Reveal(ctx context.Context, ev *outbox.Event) (Revealed, error) {
	out := Revealed{Payload: ev.Payload}
	if !strings.Contains(ev.Payload, envMarker) && !strings.Contains(ev.Payload, Redacted) {
		return out, nil
	}
	c, err := r.cls.Classify(ctx, ev.Topic, ev.Type, ev.SchemaVersion)
	switch {
	case errors.Is(err, classify.ErrUnknownVersion):
		return out, nil // the relay writes no event of such a version: nothing it encrypted
	case err != nil:
		return out, fmt.Errorf("event %s: classify topic %q type %q version %d: %w", ev.ID, ev.Topic, ev.Type, ev.SchemaVersion, err)
	case !c.HasPersonal():
		return out, nil
	}
	b := readOnly(ev.Payload)
	f, err := scan(b, r.patterns.get(c).leaves)
	if err != nil {
		return out, nil // not JSON: the relay encrypted nothing in it
	}
	var buf, ad []byte
	last := 0
	for _, sp := range f.spans {
		v := b[sp.start:sp.end]
		redacted := string(v) == Redacted // written after its subject's erasure (Protector.Event)
		if !redacted && !envelope.Is(v) {
			continue // not encrypted (a foreign writer's row): as stored
		}
		buf = append(buf, b[last:sp.start]...)
		last = sp.end
		var pt []byte
		err := keys.ErrErased
		if !redacted {
			pt, err = r.open(ctx, ev, v, sp.pointer, &ad)
		}
		switch {
		case errors.Is(err, keys.ErrErased):
			buf = append(buf, "null"...)
			out.Erased = append(out.Erased, strings.Clone(sp.pointer))
		case errors.Is(err, errUnreadable):
			buf = append(buf, "null"...)
			out.Unreadable = append(out.Unreadable, strings.Clone(sp.pointer))
			r.unreadable.Add(1)
		case err != nil:
			return Revealed{Payload: ev.Payload}, fmt.Errorf("event %s field %s: %w", ev.ID, sp.pointer, err)
		default:
			buf = append(buf, pt...)
		}
	}
	if buf == nil {
		return out, nil
	}
	buf = append(buf, b[last:]...)
	out.Payload = string(buf)
	return out, nil
}

// errUnreadable: an envelope that does not parse or does not open.
var errUnreadable = errors.New("the envelope does not open under its key (altered, or copied from another event or field)")

// open decrypts the envelope v found at pointer of ev.
func (r *Revealer) open(ctx context.Context, ev *outbox.Event, v []byte, pointer string, ad *[]byte) ([]byte, error) {
	e, err := envelope.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	a, err := r.keys.DataKey(ctx, ev.Topic, e.Subject)
	if err != nil {
		return nil, err
	}
	*ad = envelope.AssociatedData((*ad)[:0], ev.Topic, ev.ID, pointer)
	pt, err := e.Open(a, *ad)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	return pt, nil
}
