package catalog

import (
	"slices"
	"strings"
	"testing"
)

var kinds = []Kind{KindTopic, KindMarker, KindRebuildRecord, KindRebuildState, KindIntent, KindConsumer, KindProbe, KindLease, KindTopicMeta, KindRegistration, KindGroup, KindFork, KindResolved, KindClaim,
	KindContractPolicy, KindContractMode, KindContract, KindMemberEntry, KindMemberSnapshot, KindMemberProtect, KindMemberHold, KindUpcast,
	KindRelease, KindRepublish}

// keyOf builds a key of kind k from raw fuzz names (an intent's appId is
// its second name with "-a" appended, its id the third; a contract's
// version is 1); ok=false when the names are not valid.
func keyOf(k Kind, a, b string) (string, []string, bool) {
	names := []string{a, b, b}[:arity(k)]
	switch k {
	case KindIntent:
		names[1] = b + "-a"
	case KindContract:
		names[2] = "1"
	case KindMemberEntry, KindMemberSnapshot:
		names[2] = "7"
	case KindUpcast:
		names[2] = "3"
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
		{KindGroup, []string{"metrics"}, "_deltabus/groups/metrics.json"},
		{KindFork, []string{"deltabus-1-s", "2"}, "_deltabus/forks/deltabus-1-s/2.json"},
		{KindResolved, []string{"deltabus-7-s"}, "_deltabus/resolved/deltabus-7-s.json"},
		{KindClaim, []string{"_group.metrics", "deltabus-1-s"}, "_deltabus/claims/_group.metrics/deltabus-1-s.json"},
		{KindRelease, []string{"orders", "deltabus-7-s"}, "_deltabus/rebuilds/orders/deltabus-7-s/release.json"},
		{KindRepublish, []string{"0123abcd"}, "_deltabus/republish/0123abcd.json"},
		{KindContractPolicy, []string{"orders"}, "_deltabus/contracts/orders/policy.json"},
		{KindContractMode, []string{"orders", "OrderPlaced"}, "_deltabus/contracts/orders/_order_placed/mode.json"},
		{KindContract, []string{"orders", "order.placed", "12"}, "_deltabus/contracts/orders/order.placed/0000000012.json"},
		{KindContract, []string{"orders", "a/b_c d", "1"}, "_deltabus/contracts/orders/a_-2fb__c_-20d/0000000001.json"},
		{KindContract, []string{"orders", "..", "1"}, "_deltabus/contracts/orders/_-2e./0000000001.json"},
		{KindMemberEntry, []string{"billing", "orders", "12"}, "_deltabus/members/billing/orders/log/00000000000000000012.json"},
		{KindMemberSnapshot, []string{"billing", "orders", "0"}, "_deltabus/members/billing/orders/snapshots/00000000000000000000.json"},
		{KindMemberProtect, []string{"billing", "orders"}, "_deltabus/members/billing/orders/protect.json"},
		{KindMemberHold, []string{"billing", "orders"}, "_deltabus/members/billing/orders/hold.json"},
		{KindUpcast, []string{"orders", "OrderPlaced", "1"}, "_deltabus/upcasts/orders/_order_placed/0000000001.json"},
		{KindContract, []string{"orders", "policy.json", "2147483647"}, "_deltabus/contracts/orders/policy.json/2147483647.json"},
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
			if k == KindMarker || k == KindLease || k == KindProbe || k == KindTopic || k == KindContractPolicy {
				names = []string{n}
			}
			if k == KindContractMode || k == KindContract {
				names = []string{n, "Type", "1"}[:arity(k)]
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
	for _, v := range []string{"0", "-1", "01", "+1", "1.0", "2147483648", "", "1e3", " 1"} {
		if key, err := Key(KindContract, "orders", "Placed", v); err == nil {
			t.Errorf("contract version %q accepted: %q", v, key)
		}
	}
	for _, typ := range []string{"", "a\nb", "\x00", "\xff", strings.Repeat("A", 121)} {
		if key, err := Key(KindContractMode, "orders", typ); err == nil {
			t.Errorf("event type %q accepted: %q", typ, key)
		}
	}
}

// TestTypeEncoding: event types that differ, case included, never share a
// segment, and every segment is one safe key segment that decodes back.
func TestTypeEncoding(t *testing.T) {
	seen := map[string]string{}
	for _, typ := range []string{"OrderPlaced", "orderplaced", "order_placed", "order__placed", "Order_Placed", "_order_placed",
		"a/b", "a_-2fb", "..", ".", "-", "é", "order placed", "order.placed", ".hidden", "x_", "_", "__", "~"} {
		seg, err := EncodeType(typ)
		if err != nil {
			t.Fatalf("EncodeType(%q): %v", typ, err)
		}
		if prev, ok := seen[seg]; ok {
			t.Fatalf("%q and %q share segment %q", prev, typ, seg)
		}
		seen[seg] = typ
		if seg == "." || seg == ".." || strings.ContainsAny(seg, "/\\ ") || strings.ToLower(seg) != seg {
			t.Errorf("segment %q of %q is not key-safe", seg, typ)
		}
		back, err := DecodeType(seg)
		if err != nil || back != typ {
			t.Errorf("DecodeType(%q) = %q, %v; want %q", seg, back, err, typ)
		}
	}
	for _, seg := range []string{"_", "_-", "_-2", "_-zz", "_-61", "_A", ".x", "_x_"} {
		if typ, err := DecodeType(seg); err == nil {
			t.Errorf("DecodeType(%q) accepted a segment EncodeType never writes: %q", seg, typ)
		}
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
	f.Add(uint8(10), "t", "Order_Placed", uint8(10), "t", "_order__placed")
	f.Add(uint8(9), "t", "mode.json", uint8(8), "t", "")
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

// TestNameAndIDBounds: names of 1 to 128 characters and ids of 8 to 64 hex
// digits are taken, one character more or less is not.
func TestNameAndIDBounds(t *testing.T) {
	for n, ok := range map[string]bool{"a": true, "_x": true, "a.b-c_d": true, strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false, "": false, "a\n": false, "\na": false} {
		if err := CheckName("topic", n); (err == nil) != ok {
			t.Errorf("CheckName(%q): %v, want accepted %v", n, err, ok)
		}
	}
	for s, ok := range map[string]bool{"0123abcd": true, strings.Repeat("f", 64): true, "0123abc": false,
		strings.Repeat("f", 65): false, "0123ABCD": false, "": false, "0123abcd\n": false} {
		if err := CheckID(s); (err == nil) != ok {
			t.Errorf("CheckID(%q): %v, want accepted %v", s, err, ok)
		}
	}
}
