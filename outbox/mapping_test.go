package outbox

import (
	"strings"
	"testing"
)

func TestParseMapping(t *testing.T) {
	tests := []struct {
		spec string
		want Mapping
	}{
		{"", DeltaBusMapping()},
		{"deltabus", DeltaBusMapping()},
		{"debezium", DebeziumMapping()},
		{"topic=aggregatetype,key=aggregateid", Mapping{
			ID: "id", Topic: "aggregatetype", Key: "aggregateid", Type: "type", SchemaVersion: "schema_version",
			Payload: "payload", Headers: "headers", OccurredAt: "occurred_at"}},
		{" debezium , occurred_at = created_at ", Mapping{
			ID: "id", Topic: "aggregatetype", Key: "aggregateid", Type: "type", Payload: "payload", OccurredAt: "created_at"}},
		{"headers=-,schema_version=", Mapping{
			ID: "id", Topic: "topic", Key: "key", Type: "type", Payload: "payload", OccurredAt: "occurred_at"}},
	}
	for _, tt := range tests {
		got, err := ParseMapping(tt.spec)
		if err != nil {
			t.Errorf("ParseMapping(%q): %v", tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseMapping(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
		again, err := ParseMapping(got.String())
		if err != nil || again != got {
			t.Errorf("ParseMapping(%q.String() = %q) = %+v, %v; want round trip", tt.spec, got.String(), again, err)
		}
	}
}

func TestParseMappingErrors(t *testing.T) {
	tests := map[string]string{
		"kafka":              `"kafka" is not a field=column pair or a leading preset`,
		"topic=t,debezium":   `"debezium" is not a field=column pair or a leading preset`,
		"subject=s":          `unknown field "subject"`,
		"topic=-":            `field "topic" needs a column`,
		"debezium,payload= ": `field "payload" needs a column`,
	}
	for spec, want := range tests {
		_, err := ParseMapping(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMapping(%q) error = %v, want it to contain %q", spec, err, want)
		}
	}
}

func TestMappingsFor(t *testing.T) {
	ms, err := ParseMappings("", map[string]string{"legacy.outbox_events": "debezium"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ms.For("legacy", "outbox_events"); got != DebeziumMapping() {
		t.Errorf("For(legacy.outbox_events) = %+v, want Debezium", got)
	}
	if got := ms.For("public", "outbox"); got != DeltaBusMapping() {
		t.Errorf("For(public.outbox) = %+v, want DeltaBus", got)
	}
	if got := (Mappings{}).For("x", "y"); got != DeltaBusMapping() {
		t.Errorf("zero Mappings.For = %+v, want DeltaBus", got)
	}
	if _, err := ParseMappings("", map[string]string{"outbox": "debezium"}); err == nil {
		t.Error("ParseMappings accepted a table name without schema")
	}
	if _, err := ParseMappings("", map[string]string{"a.b": "nope"}); err == nil || !strings.Contains(err.Error(), "table a.b") {
		t.Errorf("ParseMappings with a bad spec: %v, want error naming the table", err)
	}
}

func TestMappingRequired(t *testing.T) {
	got := DebeziumMapping().Required()
	want := [][2]string{{"id", "id"}, {"topic", "aggregatetype"}, {"key", "aggregateid"}, {"type", "type"}, {"payload", "payload"}}
	if len(got) != len(want) {
		t.Fatalf("Required() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Required() = %v, want %v", got, want)
		}
	}
}
