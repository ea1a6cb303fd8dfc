package contract

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/usererr"
)

// TestRegisterNeverChangesAMode: a registration that names a weaker mode
// than its type's is refused, nothing written, whether the mode was set or
// is the default; only SetMode changes it, and records what it replaced.
func TestRegisterNeverChangesAMode(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	r := NewRegistry(st, nil)
	// A new type: its first registration names its mode.
	out, err := r.Register(ctx, Registration{Topic: "orders", Type: "Placed", Version: 1, Schema: []byte(orderV1), Mode: compat.BackwardTransitive})
	if err != nil || out.Mode != compat.BackwardTransitive {
		t.Fatalf("first version: %+v %v", out, err)
	}
	// A type with versions and no mode set is under the default.
	if _, err := r.Register(ctx, Registration{Topic: "orders", Type: "Shipped", Version: 1, Schema: []byte(orderV1)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ typ, mode string }{{"Placed", "BACKWARD_TRANSITIVE"}, {"Shipped", "BACKWARD"}} {
		_, err := r.Register(ctx, Registration{Topic: "orders", Type: tc.typ, Version: 2, Schema: []byte(orderV2), Mode: compat.None})
		if !errors.Is(err, ErrModeDiffers) || !usererr.Is(err) || !strings.Contains(err.Error(), "judged under "+tc.mode) ||
			!strings.Contains(err.Error(), "relay contract mode --topic orders --type "+tc.typ+" --compatibility NONE") {
			t.Fatalf("%s: a weaker mode named at registration: %v", tc.typ, err)
		}
		if sub, _ := r.subject(ctx, "orders", tc.typ); sub.Latest() != 1 || string(sub.Mode) != tc.mode {
			t.Fatalf("%s: after the refusal: latest %d, mode %s", tc.typ, sub.Latest(), sub.Mode)
		}
	}
	// Naming the type's own mode, or none, registers as before. (orderV2,
	// an optional property added to an open model, breaks BACKWARD: naming
	// NONE above was an attempt to get it past the type's mode.)
	if _, err := r.Register(ctx, Registration{Topic: "orders", Type: "Placed", Version: 2, Schema: []byte(orderV1), Mode: compat.BackwardTransitive}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, Registration{Topic: "orders", Type: "Shipped", Version: 2, Schema: []byte(orderV1)}); err != nil {
		t.Fatal(err)
	}
	// Changing the mode is its own act, recorded with what it replaced.
	prev, err := r.SetMode(ctx, "orders", "Placed", compat.None)
	if err != nil || prev != compat.BackwardTransitive {
		t.Fatalf("SetMode: %v %v", prev, err)
	}
	key, _ := catalog.Key(catalog.KindContractMode, "orders", "Placed")
	var rec modeObject
	if b, err := st.Get(ctx, key); err != nil || json.Unmarshal(b, &rec) != nil || rec.Compatibility != compat.None ||
		rec.Previous != compat.BackwardTransitive || rec.Changed.IsZero() {
		t.Fatalf("the mode's record: %+v %v", rec, err)
	}
	if _, err := r.Register(ctx, Registration{Topic: "orders", Type: "Placed", Version: 3, Schema: []byte(orderV2), Mode: compat.None}); err != nil {
		t.Fatalf("under the mode set: %v", err)
	}
}
