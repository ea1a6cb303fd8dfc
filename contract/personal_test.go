package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/pii/classify"
)

const (
	customerV1 = `{"type":"object","x-deltabus-subject":"/id","properties":{"id":{"type":"string"},
		"email":{"type":"string","x-deltabus-pii":true},"name":{"type":"string","confluent:tags":["PII"]}}}`
	customerNoMark = `{"type":"object","x-deltabus-subject":"/id","properties":{"id":{"type":"string"},
		"email":{"type":"string","x-deltabus-pii":true},"name":{"type":"string"}}}`
	customerMoved = `{"type":"object","x-deltabus-subject":"/email","properties":{"id":{"type":"string"},
		"email":{"type":"string","x-deltabus-pii":true},"name":{"type":"string","confluent:tags":["PII"]}}}`
)

func pointers(c *classify.Classification) []string {
	var out []string
	if c != nil {
		for _, p := range c.Personal {
			out = append(out, p.String())
		}
	}
	return out
}

// TestCacheClassifies: the registry's contracts say which fields are
// personal, for a version, for a version not registered of a type that
// marks personal data (ErrUnknownVersion), and for types without
// contracts; a contract registered after the cache loaded is met at once
// for a type it has not classified, and for a new version.
func TestCacheClassifies(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	r := NewRegistry(st, nil)
	register(t, r, "orders", "OrderPlaced", 1, orderV1)
	c := New(st, Options{Poll: -1, Refresh: 10 * time.Millisecond})
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if cl, err := c.Classify(ctx, "orders", "OrderPlaced", 1); cl.HasPersonal() || err != nil {
		t.Fatalf("orders v1: %v %v", cl, err)
	}
	register(t, r, "customers", "Updated", 1, customerV1) // after the cache loaded
	cl, err := c.Classify(ctx, "customers", "Updated", 1)
	if err != nil || !slices.Equal(pointers(cl), []string{"/email", "/name"}) || cl.SubjectPointer != "/id" {
		t.Fatalf("customers v1 registered after the load: %v %v", pointers(cl), err)
	}
	if _, err := c.Classify(ctx, "customers", "Updated", 7); !errors.Is(err, classify.ErrUnknownVersion) {
		t.Fatalf("an unregistered version of a personal type: %v", err)
	}
	if _, err := r.Register(ctx, Registration{Topic: "customers", Type: "Updated", Version: 2, Schema: []byte(customerV1)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past Refresh since v7 re-read the type
	if cl, err := c.Classify(ctx, "customers", "Updated", 2); err != nil || len(cl.Personal) != 2 {
		t.Fatalf("v2 right after its registration: %v %v", cl, err)
	}
	lists := st.lists.Load()
	for i := range 1000 {
		if cl, err := c.Classify(ctx, "orders", fmt.Sprintf("T%d", i%10), 1); cl != nil || err != nil {
			t.Fatalf("a type without contracts: %v %v", cl, err)
		}
	}
	if d := st.lists.Load() - lists; d > 10 {
		t.Fatalf("1,000 events of 10 types without contracts cost %d lists, want at most one per type", d)
	}
	if err := r.SetPolicy(ctx, "customers", Policy{PseudonymizeKey: true}); err != nil {
		t.Fatal(err)
	}
	all, err := c.Classifications(ctx)
	if err != nil || !all.Any() || !all.PseudonymizeKey("customers") || all.PseudonymizeKey("orders") {
		t.Fatalf("Classifications: %v %v", all, err)
	}
	if !c.PseudonymizeKey("customers") {
		t.Fatal("the cache does not see the pseudonymize-key policy after Classifications re-listed")
	}
	if n := len(all.Contracts()); n != 2 {
		t.Fatalf("Classifications lists %d classified contracts, want customers v1 and v2", n)
	}
}

// TestRegisterKeepsPersonalMarks: whatever the mode, a new version may not
// drop a personal mark or move the subject pointer, and a schema that
// marks personal data without a subject is unreadable as a contract.
func TestRegisterKeepsPersonalMarks(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newStore(t), nil)
	register(t, r, "customers", "Updated", 1, customerV1)
	for _, tc := range []struct{ schema, rule, pointer string }{
		{customerNoMark, RulePersonalMarkRemoved, "/name"},
		{customerMoved, RuleSubjectPointerChanged, "#/x-deltabus-subject"},
	} {
		_, err := r.Register(ctx, Registration{Topic: "customers", Type: "Updated", Version: 2, Schema: []byte(tc.schema), Mode: compat.None})
		var ie *IncompatibleError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: %v, want an IncompatibleError", tc.rule, err)
		}
		found := false
		for _, d := range ie.Differences {
			found = found || d.Rule == tc.rule && d.Pointer == tc.pointer
		}
		if !found {
			t.Fatalf("%s: differences %v", tc.rule, ie.Differences)
		}
	}
	_, err := r.Register(ctx, Registration{Topic: "people", Type: "Seen", Version: 1,
		Schema: []byte(`{"properties":{"email":{"x-deltabus-pii":true}}}`)})
	if err == nil || !strings.Contains(err.Error(), "names no data subject") {
		t.Fatalf("a mark without a subject: %v", err)
	}
}

// TestUnmarked: a registry without contracts or policies is unmarked at a
// generation that lasts while nothing is registered; a contract met at a
// type's first sight, or by the poll, ends it.
func TestUnmarked(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	c := New(st, Options{Poll: -1})
	if _, ok := c.Unmarked(); ok {
		t.Fatal("unmarked before the registry was read")
	}
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	gen, ok := c.Unmarked()
	if !ok {
		t.Fatal("an empty registry is not unmarked")
	}
	if cl, err := c.Classify(ctx, "orders", "Created", 1); cl != nil || err != nil {
		t.Fatalf("a type without contracts: %v %v", cl, err)
	}
	if g, ok := c.Unmarked(); !ok || g != gen {
		t.Fatalf("classifying a type without contracts moved the answer: %d %v, was %d", g, ok, gen)
	}
	register(t, NewRegistry(st, nil), "customers", "Updated", 1, customerV1)
	if g, ok := c.Unmarked(); !ok || g != gen {
		t.Fatal("the registration was seen before any read of the registry")
	}
	if cl, err := c.Classify(ctx, "customers", "Updated", 1); err != nil || !cl.HasPersonal() {
		t.Fatalf("first sight of a personal type: %v %v", cl, err)
	}
	if _, ok := c.Unmarked(); ok {
		t.Fatal("still unmarked with a personal contract in the index")
	}
}
