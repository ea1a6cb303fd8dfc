package compat

import (
	"fmt"
	"strings"
	"testing"
)

// eventSchema is an order event of n properties of assorted kinds, version v
// (each version widens the strings' maxLength: backward compatible, forward
// not).
func eventSchema(n, v int) []byte {
	var props []string
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			props = append(props, fmt.Sprintf(`"s%d": {"type": "string", "maxLength": %d}`, i, 64+v))
		case 1:
			props = append(props, fmt.Sprintf(`"n%d": {"type": ["number", "null"], "minimum": 0}`, i))
		case 2:
			props = append(props, fmt.Sprintf(`"e%d": {"enum": ["a", "b", "c"]}`, i))
		default:
			props = append(props, fmt.Sprintf(`"o%d": {"type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}, "required": ["id"]}`, i))
		}
	}
	return []byte(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "$defs": {"id": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}, "properties": {` +
		strings.Join(props, ", ") + `}, "required": ["s0"], "additionalProperties": false}`)
}

// BenchmarkCheck: registering version 11 of a 40-property event under
// FULL_TRANSITIVE, against the 10 before it (11 parses, 20 comparisons).
// Most of the time is parsing, the meta-schema check above all: a registry
// that checks often can keep the parsed versions (not offered yet).
func BenchmarkCheck(b *testing.B) {
	var prev [][]byte
	for v := 0; v < 10; v++ {
		prev = append(prev, eventSchema(40, v))
	}
	next := eventSchema(40, 10)
	b.ReportAllocs()
	for b.Loop() {
		ds, err := Check(FullTransitive, prev, next)
		if err != nil || len(ds) != 100 { // forward, 10 strings narrowed against each version
			b.Fatalf("%d differences, %v", len(ds), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/10, "µs/version")
}
