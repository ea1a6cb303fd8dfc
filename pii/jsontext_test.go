package pii

import (
	"encoding/json"
	"testing"
)

// skipByBytes is skip as it was first written, one byte at a time: the
// reference the faster skip must agree with on every input.
func skipByBytes(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, errSyntax
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipByBytes(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errSyntax
	default:
		j := i
		for j < len(b) && !delim[b[j]] {
			j++
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
}

var skipSeeds = []string{
	`"plain"`, `""`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"a\\\\"x`, `"\\\\\\"`, `"\`, `"abc`, `"\u00e9\n"`,
	`{"a":"}","b":[1,"]",{"c":"\"{"}]}`, `[[[]]]`, `[1,2`, `{"a":"b\"}`, `12.5e3,`, `true]`, `null`, ``, `,`,
	`{"k\\":"v"}`, `["\\\\\\\\"]`, `{"a":{"b":{"c":"x\\"}}}`,
}

func TestSkipAgreesWithByteScan(t *testing.T) {
	for _, s := range skipSeeds {
		for i := range len(s) + 1 {
			gotEnd, gotErr := skip([]byte(s), i)
			wantEnd, wantErr := skipByBytes([]byte(s), i)
			if gotEnd != wantEnd || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("skip(%q, %d) = %d, %v; byte by byte: %d, %v", s, i, gotEnd, gotErr, wantEnd, wantErr)
			}
		}
	}
}

func TestSkipFindsTheEndOfValidJSON(t *testing.T) {
	for _, s := range skipSeeds {
		if !json.Valid([]byte(s)) {
			continue
		}
		if end, err := skip([]byte(s), 0); err != nil || end != len(s) {
			t.Errorf("skip(%q) = %d, %v; want %d", s, end, err, len(s))
		}
	}
}

func FuzzSkip(f *testing.F) {
	for _, s := range skipSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		for i := range min(len(b)+1, 8) {
			gotEnd, gotErr := skip(b, i)
			wantEnd, wantErr := skipByBytes(b, i)
			if gotEnd != wantEnd || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("skip(%q, %d) = %d, %v; byte by byte: %d, %v", s, i, gotEnd, gotErr, wantEnd, wantErr)
			}
		}
		if json.Valid(b) {
			i := ws(b, 0)
			if end, err := skip(b, i); err != nil || ws(b, end) != len(b) {
				t.Fatalf("skip(%q) = %d, %v on valid JSON", s, end, err)
			}
		}
	})
}
