package topic

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
)

type schemaField struct {
	Name     string         `json:"name"`
	Type     string         `json:"type"`
	Nullable bool           `json:"nullable"`
	Metadata map[string]any `json:"metadata"`
}

func parseSchema(t *testing.T, s string) []schemaField {
	t.Helper()
	var st struct {
		Type   string        `json:"type"`
		Fields []schemaField `json:"fields"`
	}
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		t.Fatalf("schemaString is not JSON: %v\n%s", err, s)
	}
	if st.Type != "struct" {
		t.Fatalf("top-level type %q", st.Type)
	}
	return st.Fields
}

func TestSchemaString(t *testing.T) {
	want := "event_id:string:false topic:string:true key:string:true type:string:true " +
		"schema_version:integer:true payload:string:true headers:string:true occurred_at:timestamp:true " +
		"commit_lsn:long:true seq:integer:true xid:long:true commit_time:timestamp:true"
	dl := " dead_letter_reason:string:true source_table:string:true raw_row:string:true"
	src := " source:string:true" // appended last to both schemas
	for _, tc := range []struct {
		deadLetter bool
		want       string
	}{{false, want + src}, {true, want + dl + src}} {
		var got []string
		for _, f := range parseSchema(t, SchemaString(tc.deadLetter)) {
			if f.Metadata == nil || len(f.Metadata) != 0 {
				t.Errorf("field %s metadata %v, want {}", f.Name, f.Metadata)
			}
			got = append(got, f.Name+":"+f.Type+":"+map[bool]string{true: "true", false: "false"}[f.Nullable])
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("deadLetter=%t schema\n got %s\nwant %s", tc.deadLetter, g, tc.want)
		}
		// The Arrow schema must agree with the Delta schema, column by column.
		as := ArrowSchema(tc.deadLetter)
		for i, f := range parseSchema(t, SchemaString(tc.deadLetter)) {
			af := as.Field(i)
			if af.Name != f.Name || af.Nullable != f.Nullable {
				t.Errorf("arrow field %d = %s nullable=%t, delta %s nullable=%t", i, af.Name, af.Nullable, f.Name, f.Nullable)
			}
		}
	}
}

func TestNewTableMetadata(t *testing.T) {
	md, proto := NewTableMetadata("orders")
	line, err := json.Marshal(delta.Action{Metadata: &md})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		MetaData map[string]json.RawMessage `json:"metaData"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		"partitionColumns": `[]`,
		"format":           `{"provider":"parquet","options":{}}`,
		"name":             `"orders"`,
		"configuration": `{"delta.appendOnly":"true","delta.checkpointInterval":"100",` +
			`"delta.enableChangeDataFeed":"true","delta.logRetentionDuration":"interval 30 days"}`,
	}
	for k, want := range checks {
		if got := string(raw.MetaData[k]); got != want {
			t.Errorf("metaData.%s = %s, want %s", k, got, want)
		}
	}
	if !regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`).Match(raw.MetaData["id"]) {
		t.Errorf("id %s is not a random uuid", raw.MetaData["id"])
	}
	if md.CreatedTime == nil || *md.CreatedTime < 1_700_000_000_000 {
		t.Errorf("createdTime %v not in ms", md.CreatedTime)
	}
	if md2, _ := NewTableMetadata("orders"); md2.ID == md.ID {
		t.Error("two tables got the same metadata id")
	}
	if md.SchemaString != SchemaString(false) {
		t.Error("orders table has the wrong schema")
	}
	if dl, _ := NewTableMetadata(outbox.DeadLetterTopic); dl.SchemaString != SchemaString(true) {
		t.Error("dead-letter table does not have the dead-letter schema")
	}
	pl, err := json.Marshal(delta.Action{Protocol: &proto})
	if err != nil {
		t.Fatal(err)
	}
	wantP := `{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["appendOnly","changeDataFeed"]}}`
	if string(pl) != wantP {
		t.Errorf("protocol %s, want %s", pl, wantP)
	}
}
