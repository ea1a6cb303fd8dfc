package migrations

import "testing"

func TestParseMajor(t *testing.T) {
	for in, want := range map[string]int{"16.4": 16, "16.4 (Debian 16.4-1.pgdg120+1)": 16, "18beta1": 18, "13.23": 13, "9.6.24": 9} {
		if got, err := parseMajor(in); err != nil || got != want {
			t.Errorf("parseMajor(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseMajor("unknown"); err == nil {
		t.Error("parseMajor(\"unknown\"): no error")
	}
}
