package pii

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/classify"
)

// TestProtectNamedAndWildcard: a field marked personal by a wildcard
// (patternProperties, additionalProperties) is encrypted when the same
// member is also reached by name, in events and in dead letters, and a
// consumer reads it back.
func TestProtectNamedAndWildcard(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		name, schema, payload string
		clear                 []string // values that must not be stored in clear
		kept                  []string // text the payload keeps
	}{
		{"patternProperties beside a named property",
			`{"x-deltabus-subject":"/id","properties":{"id":{"type":"string"},"contact":{"properties":{"phone":{"x-deltabus-pii":true}}}},
			  "patternProperties":{"^c":{"properties":{"email":{"x-deltabus-pii":true}}}}}`,
			`{"id":"c-1","contact":{"phone":"+44 20 7946 0000","email":"ada@example.com"}}`,
			[]string{"+44 20 7946 0000", "ada@example.com"}, []string{`"id":"c-1"`}},
		{"additionalProperties over the subject",
			`{"x-deltabus-subject":"/email","additionalProperties":{"x-deltabus-pii":true}}`,
			`{"email":"ada@example.com","name":"Ada Lovelace"}`,
			[]string{"ada@example.com", "Ada Lovelace"}, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := classify.Parse([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			typ := "wild" + string(rune('a'+i))
			f.cls.Add("customers", typ, 1, c)
			ev := event("0190f0f0-0000-7000-8000-0000000001a"+string(rune('0'+i)), tc.payload)
			ev.Type = typ
			if dl, err := f.p.Event(ctx, ev, &Scratch{}); err != nil || dl != nil {
				t.Fatalf("protect: %v %v", dl, err)
			}
			for _, v := range tc.clear {
				if strings.Contains(ev.Payload, v) {
					t.Fatalf("stored in clear: %q in %s", v, ev.Payload)
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(ev.Payload, k) {
					t.Fatalf("lost %s: %s", k, ev.Payload)
				}
			}
			r, err := f.r.Reveal(ctx, ev)
			if err != nil || r.Payload != tc.payload || r.Unreadable != nil {
				t.Fatalf("reveal: %v %+v", err, r)
			}
			dl := &outbox.DeadLetter{Event: *event("not-a-uuid", tc.payload), Reason: "id is not a uuid", RawRow: "{}"}
			dl.Type = typ
			if err := f.p.DeadLetter(ctx, dl); err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.clear {
				if strings.Contains(dl.Payload, v) || strings.Contains(dl.RawRow, v) {
					t.Fatalf("dead letter holds %q in clear: %s / %s", v, dl.Payload, dl.RawRow)
				}
			}
		})
	}
}

// TestRevealCopiedEnvelope: a producer who can read a topic copies a real
// envelope into a new event. Where the writer's contract marks nothing
// the envelope is the producer's data: delivered as written, never
// opened. Where it marks personal data the relay encrypts the copy like
// any value. Either way Reveal delivers the event; no stored payload makes
// it fail.
func TestRevealCopiedEnvelope(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	orig := event("0190f0f0-0000-7000-8000-000000000101", `{"customer":{"id":"c-1","email":"ada@example.com"}}`)
	if _, err := f.p.Event(ctx, orig, &Scratch{}); err != nil {
		t.Fatal(err)
	}
	env := orig.Payload[strings.Index(orig.Payload, `{"x-deltabus-enc"`):strings.LastIndex(orig.Payload, `}}`)]
	if !strings.HasSuffix(env, `"}`) {
		t.Fatalf("envelope %s", env)
	}
	cases := []struct{ name, typ, payload string }{
		{"unmarked field of a marked type", "updated", `{"customer":{"id":"c-2","email":"bob@example.com","note":` + env + `}}`},
		{"type without personal data", "deleted", `{"customer":{"id":"c-2","email":` + env + `}}`},
		{"marked field", "updated", `{"customer":{"id":"c-2","email":` + env + `}}`},
		{"unmarked field, nothing else", "updated", `{"customer":{"id":"c-2"},"copy":` + env + `}`},
	}
	for n, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := event("0190f0f0-0000-7000-8000-00000000020"+string(rune('0'+n)), tc.payload)
			ev.Type = tc.typ
			if dl, err := f.p.Event(ctx, ev, &Scratch{}); err != nil || dl != nil {
				t.Fatalf("protect: %v %v", dl, err)
			}
			stored := *ev
			stored.Payload = strings.Clone(ev.Payload)
			r, err := f.r.Reveal(ctx, &stored)
			if err != nil {
				t.Fatalf("a copied envelope fails the event: %v", err)
			}
			if r.Payload != tc.payload || r.Erased != nil || r.Unreadable != nil {
				t.Fatalf("revealed %+v\nwant the producer's payload %s", r, tc.payload)
			}
		})
	}
	// The stored copy of the first event moved under another event (the
	// store altered): its personal field reads as null, listed; the rest
	// is delivered.
	moved := *orig
	moved.ID = "0190f0f0-0000-7000-8000-000000000102"
	r, err := f.r.Reveal(ctx, &moved)
	if err != nil || r.Payload != `{"customer":{"id":"c-1","email":null}}` || len(r.Unreadable) != 1 || r.Unreadable[0] != "/customer/email" {
		t.Fatalf("moved envelope: %v %+v", err, r)
	}
}

// TestEventRelayedAfterItsSubjectsErasure: an event written before its
// subject's erasure and relayed after it (another source's relay that
// lagged, a bootstrap --recover, a rebuild) is written with its personal
// fields redacted, never under a new key; consumers read them as erased.
// An event written after the erasure gets a new key.
func TestEventRelayedAfterItsSubjectsErasure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute).UTC()
	first := event("0190f0f0-0000-7000-8000-000000000301", `{"customer":{"id":"c-5","email":"ada@example.com"}}`)
	first.OccurredAt, first.CommitTime = before, before
	if _, err := f.p.Event(ctx, first, &Scratch{}); err != nil {
		t.Fatal(err)
	}
	sub, _ := f.relay.SubjectHash([]byte("c-5"))
	if _, err := f.relay.Delete(ctx, sub, ""); err != nil {
		t.Fatal(err)
	}
	late := event("0190f0f0-0000-7000-8000-000000000302", `{"customer":{"id":"c-5","email":"ada@example.com"}}`)
	late.OccurredAt, late.CommitTime = before, time.Now().UTC() // a snapshot's row: its commit time is the snapshot's
	if dl, err := f.p.Event(ctx, late, &Scratch{}); err != nil || dl != nil {
		t.Fatalf("protect: %v %v", dl, err)
	}
	if late.Payload != `{"customer":{"id":"c-5","email":`+Redacted+`}}` {
		t.Fatalf("an event written before the erasure: %s", late.Payload)
	}
	r, err := f.r.Reveal(ctx, late)
	if err != nil || r.Payload != `{"customer":{"id":"c-5","email":null}}` || len(r.Erased) != 1 {
		t.Fatalf("reveal: %v %+v", err, r)
	}
	next := event("0190f0f0-0000-7000-8000-000000000303", `{"customer":{"id":"c-5","email":"ada@example.org"}}`)
	next.OccurredAt, next.CommitTime = time.Now().Add(time.Second).UTC(), time.Now().Add(time.Second).UTC()
	sc := &Scratch{} // one relay's, keeping the new key
	if _, err := f.p.Event(ctx, next, sc); err != nil || !strings.Contains(next.Payload, `"x-deltabus-enc"`) {
		t.Fatalf("an event written after the erasure: %v %s", err, next.Payload)
	}
	if r, err := f.r.Reveal(ctx, next); err != nil || !strings.Contains(r.Payload, "ada@example.org") {
		t.Fatalf("reveal after: %v %+v", err, r)
	}
	// The new key exists now, in the relay's hands too; an event written
	// before the erasure still gets none.
	again := event("0190f0f0-0000-7000-8000-000000000304", `{"customer":{"id":"c-5","email":"ada@example.com"}}`)
	again.OccurredAt, again.CommitTime = before, before
	if _, err := f.p.Event(ctx, again, sc); err != nil || strings.Contains(again.Payload, "ada@") || !strings.Contains(again.Payload, Redacted) {
		t.Fatalf("an event written before the erasure, after a new key: %v %s", err, again.Payload)
	}
}
