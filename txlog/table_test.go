package txlog

import (
	"encoding/json"
	"testing"
)

func TestTopicsJSON(t *testing.T) {
	for _, m := range []map[string]int64{{}, {"orders": 2}, {"payments": 1, "orders": 3, "_dead_letter": 1}, {"odd\"key\\": 4, "é": 5}} {
		s := topicsJSON(m)
		var back map[string]int64
		if err := json.Unmarshal([]byte(s), &back); err != nil {
			t.Fatalf("%v: %s is not JSON: %v", m, s, err)
		}
		if len(back) != len(m) {
			t.Fatalf("%v: read back %v", m, back)
		}
		for k, v := range m {
			if back[k] != v {
				t.Fatalf("%v: read back %v", m, back)
			}
		}
	}
	if got := topicsJSON(map[string]int64{"b": 1, "a": 2}); got != `{"a":2,"b":1}` {
		t.Fatalf("keys not sorted: %s", got)
	}
}
