package catalog

import (
	"slices"
	"strings"
	"testing"
)

var kinds = []Kind{KindTopic, KindMarker, KindRebuildRecord, KindRebuildState, KindIntent, KindConsumer, KindProbe, KindLease, KindTopicMeta, KindRegistration}

func arity(k Kind) int {
	switch k {
	case KindRebuildRecord, KindRebuildState, KindConsumer:
		return 2
	case KindIntent:
		return 3
	}
	return 1
}

// keyOf builds a key of kind k from raw fuzz names (an intent's appId is
// its second name with "-a" appended, its id the third); ok=false when the
// names are not valid.
func keyOf(k Kind, a, b string) (string, []string, bool) {
	names := []string{a, b, b}[:arity(k)]
	if k == KindIntent {
		names[1] = b + "-a"
	}
	key, err := Key(k, names...)
	return key, names, err == nil
}

func TestKeyLayout(t *testing.T) {
	for _, c := range []struct {
		kind  Kind
		names []string
		want  string
	}{
		{KindTopic, []string{"orders"}, "_deltabus/topics/orders"},
		{KindMarker, []string{"deltabus-main"}, "_deltabus/relays/deltabus-main.json"},
		{KindRebuildRecord, []string{"a.relay", "deltabus-1-s"}, "_deltabus/rebuilds/a.relay/deltabus-1-s/record.json"},
		{KindRebuildState, []string{"a", "deltabus-1-s"}, "_deltabus/rebuilds/a/deltabus-1-s/state.json"},
		{KindIntent, []string{"orders", "deltabus-1-s", "0123abcd"}, "_deltabus/rebuilds/orders/deltabus-1-s/intents/0123abcd.json"},
		{KindConsumer, []string{"billing", "orders"}, "_deltabus/consumers/billing/orders.json"},
		{KindTopicMeta, []string{"orders"}, "_deltabus/topicmeta/orders.json"},
		{KindRegistration, []string{"deltabus-main"}, "_deltabus/unitycatalog/deltabus-main.json"},
	} {
		got, err := Key(c.kind, c.names...)
		if err != nil || got != c.want {
			t.Errorf("Key(%s, %q) = %q, %v; want %q", c.kind, c.names, got, err, c.want)
		}
	}
	// The collision of the first layout: a topic named "a.relay".
	rec, _ := Key(KindRebuildRecord, "a.relay", "r")
	st, _ := Key(KindRebuildState, "a", "r")
	if rec == st {
		t.Fatalf("record of a.relay and state of a share key %q", rec)
	}
	// Two sources' states of one topic never share a key.
	s1, _ := Key(KindRebuildState, "orders", "deltabus-1-s")
	s2, _ := Key(KindRebuildState, "orders", "deltabus-2-s")
	if s1 == s2 {
		t.Fatalf("two sources share the state key %q", s1)
	}
}

func TestKeyRejectsHostileNames(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b", "../x", "A", "-a", ".hidden", "a b", "é", strings.Repeat("a", 129), "a\x00"} {
		for _, k := range kinds {
			names := []string{n, "deltabus-1-s", "0123abcd"}[:arity(k)]
			if k == KindConsumer {
				names = []string{"group", n}
			}
			if k == KindMarker || k == KindLease || k == KindProbe || k == KindTopic {
				names = []string{n}
			}
			if key, err := Key(k, names...); err == nil {
				t.Errorf("Key(%s, %q) accepted: %q", k, names, key)
			}
		}
	}
	for _, n := range []string{"", "..", "a/b", "A"} {
		for _, k := range []Kind{KindRebuildRecord, KindRebuildState, KindIntent} {
			names := []string{"orders", n, "0123abcd"}[:arity(k)]
			if key, err := Key(k, names...); err == nil {
				t.Errorf("Key(%s, %q) accepted: %q", k, names, key)
			}
		}
	}
	if _, err := Key(KindIntent, "orders", "r", "../../x"); err == nil {
		t.Error("an intent id with a path was accepted")
	}
}

// FuzzKeysNeverCollide: the key of every valid (kind, names) parses back to
// exactly that kind and those names, so two different objects never share
// a key; and Parse accepts nothing Key would not build.
func FuzzKeysNeverCollide(f *testing.F) {
	f.Add(uint8(0), "orders", "x", uint8(3), "a.relay", "y")
	f.Add(uint8(2), "a.relay", "", uint8(3), "a", "")
	f.Add(uint8(4), "t", "0123abcd", uint8(5), "t", "0123abcd.json")
	f.Add(uint8(2), "t", "intents", uint8(4), "t", "record")
	f.Add(uint8(5), "g", "t.json", uint8(5), "g.json", "t")
	f.Fuzz(func(t *testing.T, k1 uint8, a1, b1 string, k2 uint8, a2, b2 string) {
		kind1, kind2 := kinds[int(k1)%len(kinds)], kinds[int(k2)%len(kinds)]
		key1, n1, ok1 := keyOf(kind1, a1, b1)
		key2, n2, ok2 := keyOf(kind2, a2, b2)
		for _, c := range []struct {
			ok    bool
			key   string
			kind  Kind
			names []string
		}{{ok1, key1, kind1, n1}, {ok2, key2, kind2, n2}} {
			if !c.ok {
				continue
			}
			gk, gn, ok := Parse(c.key)
			if !ok || gk != c.kind || !slices.Equal(gn, c.names) {
				t.Fatalf("Parse(%q) = %s %q %v; built from %s %q", c.key, gk, gn, ok, c.kind, c.names)
			}
		}
		if ok1 && ok2 && key1 == key2 && (kind1 != kind2 || !slices.Equal(n1, n2)) {
			t.Fatalf("%s %q and %s %q share key %q", kind1, n1, kind2, n2, key1)
		}
		if kind, names, ok := Parse(a1); ok {
			if key, err := Key(kind, names...); err != nil || key != a1 {
				t.Fatalf("Parse(%q) accepted a key Key does not build", a1)
			}
		}
	})
}
