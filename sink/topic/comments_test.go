package topic

import (
	"strings"
	"testing"

	"github.com/deltabus/deltabus/sink/delta"
)

func TestWithComments(t *testing.T) {
	for _, dl := range []bool{false, true} {
		plain := SchemaString(dl)
		comments := ColumnComments(dl)
		got, err := WithComments(plain, comments)
		if err != nil {
			t.Fatal(err)
		}
		if !delta.SameSchema(plain, got) {
			t.Fatalf("comments changed the schema's structure:\n%s\n%s", plain, got)
		}
		s, err := delta.ParseSchema(got)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.Fields {
			if c, _ := f.Metadata["comment"].(string); c == "" || c != comments[f.Name] {
				t.Errorf("deadLetter=%t: column %s comment %q", dl, f.Name, c)
			}
		}
		if n := strings.Count(got, `"metadata":`); n != len(s.Fields) {
			t.Errorf("%d metadata objects for %d fields", n, len(s.Fields))
		}
		// An empty comment removes it; the other metadata stays.
		back, err := WithComments(strings.Replace(got, `"metadata":{`, `"metadata":{"x.other":7,`, 1), map[string]string{"event_id": ""})
		if err != nil {
			t.Fatal(err)
		}
		s, _ = delta.ParseSchema(back)
		if _, has := s.Fields[0].Metadata["comment"]; has || s.Fields[0].Metadata["x.other"] == nil || s.Fields[1].Metadata["comment"] == nil {
			t.Errorf("removing event_id's comment: %s", back)
		}
	}
	if _, err := WithComments(`{"type":"long"}`, nil); err == nil {
		t.Error("a non-struct schema was accepted")
	}
}
