package unitycatalog

import (
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "main", "Team_1@prod-x", strings.Repeat("z", 255)} {
		if err := CheckName("catalog", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "é", "a/b", strings.Repeat("z", 256), "x\x00"} {
		if err := CheckName("catalog", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
