package coop

import (
	"testing"
	"time"
)

// TestYielderParksOncePerParkEvery: a Yielder parks (and starts counting
// again) only once ParkEvery has passed since its last park, and a park
// sleeps.
func TestYielderParksOncePerParkEvery(t *testing.T) {
	var y Yielder
	y.Yield()
	first := y.last
	if first.IsZero() {
		t.Fatal("the first Yield did not start the count")
	}
	y.Yield()
	if !y.last.Equal(first) {
		t.Fatal("a Yield within ParkEvery of the last park parked")
	}
	y.last = time.Now().Add(-ParkEvery)
	t0 := time.Now()
	y.Yield()
	if took := time.Since(t0); took < park {
		t.Fatalf("a Yield past ParkEvery returned after %v, want a park of at least %v", took, park)
	}
	if !y.last.After(t0) {
		t.Fatal("a park did not start the count again")
	}
}
