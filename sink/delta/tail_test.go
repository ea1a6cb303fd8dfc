package delta

import (
	"bufio"
	"bytes"
	"testing"
)

// TestWriteRowNestsJSONColumns: a column named for nesting is written as
// compacted JSON when it holds valid JSON (no newline survives, so the
// output stays one line per row) and as a JSON string otherwise; other
// columns are untouched.
func TestWriteRowNestsJSONColumns(t *testing.T) {
	row := []RowField{
		{"payload", "{\"a\": 1,\n \"b\": [true, null]}"},
		{"headers", "not json {"},
		{"key", `{"k":1}`},
		{"missing", nil},
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeRow(w, row, map[string]bool{"payload": true, "headers": true, "missing": true}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := `{"payload":{"a":1,"b":[true,null]},"headers":"not json {","key":"{\"k\":1}","missing":null}` + "\n"
	if got := buf.String(); got != want {
		t.Errorf("row\n got %s\nwant %s", got, want)
	}
}
