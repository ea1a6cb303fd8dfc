package outbox

import (
	"fmt"
	"testing"

	"github.com/deltabus/deltabus/decoding"
)

// TestRouteViewMatchesRoute: RouteView reads the same event as Route, for
// rows with and without the optional fields and with an upper-case id, and
// routes a valid row of a known topic without allocating.
func TestRouteViewMatchesRoute(t *testing.T) {
	rows := map[string]func() []decoding.Datum{
		"all fields": goodTuple,
		"optional NULLs": func() []decoding.Datum {
			tu := goodTuple()
			tu[4], tu[6], tu[7] = null, null, null
			return tu
		},
		"lower-case id": func() []decoding.Datum {
			tu := goodTuple()
			tu[0] = txt("0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f")
			return tu
		},
	}
	for name, tuple := range rows {
		t.Run(name, func(t *testing.T) {
			r := NewRouter(Mappings{})
			want, _, err := r.Route(newRow(outboxRelation(), decoding.OpInsert, tuple()))
			if err != nil || want == nil {
				t.Fatalf("Route = %v, %v", want, err)
			}
			var v View
			row := newRow(outboxRelation(), decoding.OpInsert, tuple())
			isEvent, dl, err := r.RouteView(row, &v)
			if !isEvent || dl != nil || err != nil {
				t.Fatalf("RouteView = %v, %+v, %v; want an event", isEvent, dl, err)
			}
			checkEvent(t, &v.Event, *want)
			allocs := testing.AllocsPerRun(100, func() { r.RouteView(row, &v) })
			if allocs != 0 && name == "lower-case id" {
				t.Errorf("RouteView allocates %.0f times per row, want 0", allocs)
			}
		})
	}
}

// TestRouteViewAliasesRowTopicDoesNot: a View's text changes with the
// row's buffer (the documented contract), but its Topic, interned, does
// not: the relay keys its maps by it.
func TestRouteViewAliasesRowTopicDoesNot(t *testing.T) {
	r := NewRouter(Mappings{})
	row := newRow(outboxRelation(), decoding.OpInsert, goodTuple())
	var v View
	if ok, _, err := r.RouteView(row, &v); !ok || err != nil {
		t.Fatalf("RouteView = %v, %v", ok, err)
	}
	for i := range row.New {
		for j := range row.New[i].Data {
			row.New[i].Data[j] = 'X'
		}
	}
	if v.Topic != "orders" {
		t.Errorf("Topic = %q after the row's buffer changed, want %q", v.Topic, "orders")
	}
	if v.Key != "XXXXXXXX" {
		t.Errorf("Key = %q, want the row's bytes (XXXXXXXX): a View reads in place", v.Key)
	}
}

// TestRouteViewTopicPastInternBound: past maxTopicNames distinct topics a
// View's Topic is a copy, not interned, and still does not alias the row.
func TestRouteViewTopicPastInternBound(t *testing.T) {
	r := NewRouter(Mappings{})
	var v View
	for i := range maxTopicNames + 2 {
		tuple := goodTuple()
		tuple[1] = txt(fmt.Sprintf("t%d", i))
		row := newRow(outboxRelation(), decoding.OpInsert, tuple)
		if ok, _, err := r.RouteView(row, &v); !ok || err != nil {
			t.Fatalf("topic %d: RouteView = %v, %v", i, ok, err)
		}
		want := string(row.New[1].Data)
		clear(row.New[1].Data)
		if v.Topic != want {
			t.Fatalf("topic %d: Topic = %q after the row's buffer changed, want %q", i, v.Topic, want)
		}
	}
	if len(r.names) != maxTopicNames {
		t.Errorf("%d interned names, want the bound %d", len(r.names), maxTopicNames)
	}
}
