package bootstrap

import (
	"strings"
	"testing"

	"github.com/deltabus/deltabus/decoding"
)

// TestCopyRowsParsesTextFormatAcrossSplits feeds COPY text output in every
// possible two-piece split and checks values, NULLs, empty strings and
// escapes.
func TestCopyRowsParsesTextFormatAcrossSplits(t *testing.T) {
	input := "a\t\\N\t\n" + `x\ty\\z\nw\r\b\f\v` + "\t\t\\\\N\n"
	want := [][]string{{"a", "<NULL>", ""}, {"x\ty\\z\nw\r\b\f\v", "", `\N`}}
	for split := 0; split <= len(input); split++ {
		var got [][]string
		c := newCopyRows(3, func(ds []decoding.Datum) error {
			row := make([]string, len(ds))
			for i, d := range ds {
				switch {
				case d.Kind == decoding.DatumNull:
					row[i] = "<NULL>"
				case d.Kind == decoding.DatumText && d.Data != nil:
					row[i] = string(d.Data)
				default:
					t.Fatalf("datum %+v", d)
				}
			}
			got = append(got, row)
			return nil
		})
		for _, part := range []string{input[:split], input[split:]} {
			if _, err := c.Write([]byte(part)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.finish(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || strings.Join(got[0], "|") != strings.Join(want[0], "|") || strings.Join(got[1], "|") != strings.Join(want[1], "|") {
			t.Fatalf("split %d: got %q, want %q", split, got, want)
		}
	}
}

func TestCopyRowsRejectsWrongColumnCountAndTruncation(t *testing.T) {
	c := newCopyRows(2, func([]decoding.Datum) error { return nil })
	if _, err := c.Write([]byte("a\tb\tc\n")); err == nil {
		t.Error("3 columns accepted for 2")
	}
	c = newCopyRows(2, func([]decoding.Datum) error { return nil })
	if _, err := c.Write([]byte("a\n")); err == nil {
		t.Error("1 column accepted for 2")
	}
	c = newCopyRows(2, func([]decoding.Datum) error { return nil })
	_, _ = c.Write([]byte("a\tb"))
	if c.finish() == nil {
		t.Error("truncated row accepted")
	}
}

func TestQuoteLiteral(t *testing.T) {
	if got := quoteLiteral(`it's a \ test`); got != `E'it''s a \\ test'` {
		t.Errorf("quoteLiteral = %s", got)
	}
}
