package pii

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const schemaV1 = `{"x-deltabus-subject":"/customer/id","type":"object","properties":{
  "customer":{"properties":{"id":{"type":"string"},"email":{"type":"string","x-deltabus-pii":true},
    "addresses":{"items":{"properties":{"street":{"confluent:tags":["PII"]},"city":{"type":"string"}}}}}},
  "total":{"type":"number"}}}`

type fixture struct {
	relay, consumer *keys.Store
	p               *Protector
	r               *Revealer
	cls             *classify.Static
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	if _, err := migrations.ApplyKeys(ctx, db.Conn(t)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kek.json")
	if _, err := keys.WriteKEKFile(path); err != nil {
		t.Fatal(err)
	}
	kek, err := keys.OpenKEK(ctx, "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{cls: classify.NewStatic()}
	if f.relay, err = keys.Open(ctx, db.DSN, kek, keys.Options{}); err != nil {
		t.Fatal(err)
	}
	if f.consumer, err = keys.Open(ctx, db.DSN, kek, keys.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.relay.Close(); f.consumer.Close() })
	c, err := classify.Parse([]byte(schemaV1))
	if err != nil {
		t.Fatal(err)
	}
	f.cls.Add("customers", "updated", 1, c)
	f.cls.Add("customers", "deleted", 1, nil)
	f.cls.SetPseudonymizeKey("people")
	if f.p, err = NewProtector(f.cls, f.relay); err != nil {
		t.Fatal(err)
	}
	f.r = NewRevealer(f.consumer, f.cls)
	return f
}

func event(id, payload string) *outbox.Event {
	return &outbox.Event{ID: id, Topic: "customers", Key: "c-1", Type: "updated", SchemaVersion: 1, Payload: payload,
		OccurredAt: time.Now().UTC()}
}

const secrets = `ada@example.com|1 Analytical Engine Way|2 Difference Row`

func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range strings.Split(secrets, "|") {
		if strings.Contains(s, v) {
			t.Fatalf("%s holds %q in clear: %s", what, v, s)
		}
	}
}

func TestProtectReveal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	payload := `{"customer":{"id":"c-1","email":"ada@example.com","addresses":[{"street":"1 Analytical Engine Way","city":"London"},` +
		`{"city":"Paris","street":"2 Difference Row"},{"street":null}]},"total":12.50, "note" : "kept \"as is\""}`
	ev := event("0190f0f0-0000-7000-8000-000000000001", payload)
	dl, err := f.p.Event(ctx, ev, &Scratch{})
	if err != nil || dl != nil {
		t.Fatalf("protect: %v %v", dl, err)
	}
	noSecret(t, "protected payload", ev.Payload)
	for _, kept := range []string{`"id":"c-1"`, `"city":"London"`, `"total":12.50, "note" : "kept \"as is\""`, `{"street":null}`} {
		if !strings.Contains(ev.Payload, kept) {
			t.Fatalf("protected payload lost %s: %s", kept, ev.Payload)
		}
	}
	if n := strings.Count(ev.Payload, `"x-deltabus-enc":1`); n != 3 {
		t.Fatalf("%d envelopes, want 3: %s", n, ev.Payload)
	}
	r, err := f.r.Reveal(ctx, ev)
	if err != nil || r.Payload != payload || r.Erased != nil || r.Unreadable != nil {
		t.Fatalf("reveal: %v %+v\n got %s\nwant %s", err, r, r.Payload, payload)
	}
	// An envelope is bound to its event and place: moved to another event,
	// its field reads as null and is listed, and the event is delivered.
	moved := *ev
	moved.ID = "0190f0f0-0000-7000-8000-000000000002"
	r, err = f.r.Reveal(ctx, &moved)
	want := []string{"/customer/email", "/customer/addresses/0/street", "/customer/addresses/1/street"}
	if err != nil || !slices.Equal(r.Unreadable, want) || r.Erased != nil || strings.Count(r.Payload, "null") != 4 || f.r.Unreadable() != 3 {
		t.Fatalf("moved to another event: %v %+v (%d unreadable)", err, r, f.r.Unreadable())
	}
	noSecret(t, "revealed in another event", r.Payload)
	// Erasure: the subject's fields read as null, with their pointers.
	sub, _ := f.relay.SubjectHash([]byte("c-1"))
	if _, err := f.relay.Delete(ctx, sub, ""); err != nil {
		t.Fatal(err)
	}
	f.consumer.Forget("", sub)
	r, err = f.r.Reveal(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Payload
	if !slices.Equal(r.Erased, want) || r.Unreadable != nil || strings.Count(got, "null") != 4 {
		t.Fatalf("after erasure: %+v", r)
	}
	noSecret(t, "revealed after erasure", got)
}

func TestProtectNumberSubjectAndOtherTypes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ev := event("0190f0f0-0000-7000-8000-000000000003", `{"customer":{"id":42,"email":"ada@example.com"}}`)
	if dl, err := f.p.Event(ctx, ev, &Scratch{}); err != nil || dl != nil {
		t.Fatal(dl, err)
	}
	noSecret(t, "payload", ev.Payload)
	h1, _ := f.relay.SubjectHash([]byte("42"))
	if !strings.Contains(ev.Payload, h1.String()) {
		t.Fatal("a number subject is hashed by its literal")
	}
	plain := `{"customer":{"id":"c-1","email":"ada@example.com"}}`
	other := event("0190f0f0-0000-7000-8000-000000000004", plain)
	other.Type = "deleted" // its schema marks nothing
	if dl, err := f.p.Event(ctx, other, &Scratch{}); err != nil || dl != nil || other.Payload != plain {
		t.Fatalf("unmarked type changed: %v %v %s", dl, err, other.Payload)
	}
	p := &outbox.Event{ID: "0190f0f0-0000-7000-8000-000000000005", Topic: "people", Key: "ada@example.com", Type: "x", Payload: `{}`}
	if dl, err := f.p.Event(ctx, p, &Scratch{}); err != nil || dl != nil || !strings.HasPrefix(p.Key, keys.PseudonymPrefix) {
		t.Fatalf("pseudonymised key: %q %v %v", p.Key, dl, err)
	}
}

func TestProtectDeadLetters(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct{ name, payload, version, reason string }{
		{"subject missing", `{"customer":{"email":"ada@example.com"}}`, "1", "subject pointer /customer/id found nothing"},
		{"subject an object", `{"customer":{"id":{"x":1},"email":"ada@example.com"}}`, "1", "found an object, not a string or number"},
		{"unknown version", `{"customer":{"id":"c-1","email":"ada@example.com"}}`, "2", "no schema for this version"},
		{"not JSON", `{"customer":{"id":"c-1","email":"ada@example.com"`, "1", "payload is not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := event("0190f0f0-0000-7000-8000-000000000010", tc.payload)
			if tc.version == "2" {
				ev.SchemaVersion = 2
			}
			dl, err := f.p.Event(ctx, ev, &Scratch{})
			if err != nil || dl == nil {
				t.Fatalf("want a dead letter: %v %v", dl, err)
			}
			if !strings.Contains(dl.Reason, tc.reason) {
				t.Fatalf("reason %q", dl.Reason)
			}
			noSecret(t, "reason", dl.Reason)
			noSecret(t, "payload", dl.Payload)
			noSecret(t, "raw row", dl.RawRow)
			if dl.ID != ev.ID || dl.Topic != "customers" {
				t.Fatalf("dead letter fields: %+v", dl.Event)
			}
		})
	}
	// A dead letter the router made (a bad id, say) of a personal topic.
	dl := &outbox.DeadLetter{Event: *event("not-a-uuid", `{"customer":{"id":"c-1","email":"ada@example.com"}}`),
		Reason: "id is not a uuid", RawRow: `{"id":"not-a-uuid","payload":"{\"customer\":{\"email\":\"ada@example.com\"}}","extra":"ada@example.com"}`}
	if err := f.p.DeadLetter(t.Context(), dl); err != nil {
		t.Fatal(err)
	}
	noSecret(t, "payload", dl.Payload)
	noSecret(t, "raw row", dl.RawRow)
	if !strings.Contains(dl.Payload, `"id":"c-1"`) {
		t.Fatalf("redaction took more than the personal fields: %s", dl.Payload)
	}
	again := *dl
	f.p.DeadLetter(t.Context(), &again)
	if again.RawRow != dl.RawRow {
		t.Fatal("redaction is not deterministic")
	}
	other := &outbox.DeadLetter{Event: outbox.Event{Topic: "orders", Payload: `{"a":1}`}, RawRow: `{"x":1}`}
	f.p.DeadLetter(t.Context(), other)
	if other.RawRow != `{"x":1}` {
		t.Fatal("a dead letter of a topic without personal data was changed")
	}
}

// TestErasureRecordsDropCachedKeys: a consumer that cached a subject's key
// keeps decrypting until it reads the erasure record, then reads null.
func TestErasureRecordsDropCachedKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := NewErasureWatcher(root, f.consumer, nil)
	if err := w.Poll(ctx); err != nil { // no _erasures table yet
		t.Fatal(err)
	}
	ev := event("0190f0f0-0000-7000-8000-000000000020", `{"customer":{"id":"c-9","email":"ada@example.com"}}`)
	if _, err := f.p.Event(ctx, ev, &Scratch{}); err != nil {
		t.Fatal(err)
	}
	stored := strings.Clone(ev.Payload)
	reveal := func() (Revealed, error) {
		e := *ev
		e.Payload = stored
		return f.r.Reveal(ctx, &e)
	}
	if got, err := reveal(); err != nil || !strings.Contains(got.Payload, "ada@example.com") {
		t.Fatalf("before erasure: %s %v", got.Payload, err)
	}
	sub, _ := f.relay.SubjectHash([]byte("c-9"))
	if _, err := f.relay.Delete(ctx, sub, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := reveal(); !strings.Contains(got.Payload, "ada@example.com") {
		t.Fatal("the consumer's cache should still hold the key before the record")
	}
	if _, err := RecordErasure(ctx, root, Erasure{Subject: sub.String(), Topics: []string{"customers"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := reveal()
	if err != nil || len(got.Erased) != 1 || strings.Contains(got.Payload, "ada@example.com") {
		t.Fatalf("after the erasure record: %+v %v", got, err)
	}
	// The record is a topic table's event, and CountSubject finds nothing
	// of the subject in it (it holds the hash as key and in its payload,
	// not an envelope).
	if n, total, err := CountSubject(ctx, root, ErasuresTopic, sub); err != nil || n != 0 || total != 1 {
		t.Fatalf("count in _erasures: %d of %d, %v", n, total, err)
	}
}
