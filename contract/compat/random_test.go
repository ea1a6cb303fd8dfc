package compat

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRandomSchemas checks, on schemas generated from the keywords this
// package compares, what must hold whatever the schema: it is well-formed,
// a schema is compatible with itself, anything may become {} and false may
// become anything, and Diff of two such schemas does not fail.
func TestRandomSchemas(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	var docs [][]byte
	for i := 0; i < 150; i++ {
		g := &gen{r: r, d: []string{"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"}[i%2]}
		doc := g.root()
		b, _ := json.Marshal(doc)
		if err := WellFormed(b); err != nil {
			t.Fatalf("generated %s: %v", b, err)
		}
		docs = append(docs, b)
	}
	for i, a := range docs {
		for _, c := range []struct {
			name string
			o, u []byte
		}{{"itself", a, a}, {"to {}", a, []byte(`{}`)}, {"from false", []byte(`false`), a}} {
			ds, err := Diff(c.o, c.u)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, a, err)
			}
			for _, d := range ds {
				if !d.Compatible() {
					t.Errorf("%s, %s: %v", c.name, a, d)
				}
			}
		}
		if _, err := Diff(a, docs[(i+1)%len(docs)]); err != nil {
			t.Errorf("Diff(%s, %s): %v", a, docs[(i+1)%len(docs)], err)
		}
	}
}

type gen struct {
	r *rand.Rand
	d string // $schema
}

func (g *gen) root() map[string]any {
	s := g.schema(3)
	m, ok := s.(map[string]any)
	if !ok {
		m = map[string]any{"allOf": []any{s}}
	}
	m["$schema"] = g.d
	defs := "definitions"
	if g.d != "http://json-schema.org/draft-07/schema#" {
		defs = "$defs"
	}
	a := g.schema(1)
	if am, ok := a.(map[string]any); ok && am["$ref"] != nil {
		a = map[string]any{"type": "integer"} // not a $ref to itself
	}
	m[defs] = map[string]any{"a": a, "b": map[string]any{"type": "object", "properties": map[string]any{"next": map[string]any{"$ref": "#/" + defs + "/b"}}}}
	return m
}

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) schema(depth int) any {
	if depth == 0 || g.pick(8) == 0 {
		return []any{true, false, map[string]any{}, map[string]any{"type": "string"}}[g.pick(4)]
	}
	s := map[string]any{}
	switch g.pick(10) {
	case 0:
		s["type"] = []any{"string", "null"}
		s["maxLength"] = g.pick(5)
	case 1, 2:
		g.object(s, depth)
	case 3:
		g.array(s, depth)
	case 4:
		s["type"] = []string{"number", "integer"}[g.pick(2)]
		s["minimum"], s["multipleOf"] = g.pick(3), 0.5*float64(1+g.pick(3))
	case 5:
		s["enum"] = []any{"x", 1, map[string]any{"k": g.pick(2)}}[:1+g.pick(3)]
	case 6:
		s[[]string{"allOf", "anyOf", "oneOf"}[g.pick(3)]] = []any{g.schema(depth - 1), g.schema(depth - 1)}
	case 7:
		s["not"] = g.schema(depth - 1)
	case 8:
		s["$ref"] = "#/" + map[bool]string{true: "definitions", false: "$defs"}[g.d == "http://json-schema.org/draft-07/schema#"] + "/" + []string{"a", "b"}[g.pick(2)]
	default:
		s["type"], s["pattern"], s["const"] = "string", "^a", "abc"
	}
	if g.pick(4) == 0 {
		s["title"], s["default"] = fmt.Sprint("t", g.pick(3)), g.pick(2)
	}
	return s
}

func (g *gen) object(s map[string]any, depth int) {
	s["type"] = "object"
	props := map[string]any{}
	for i := 0; i < g.pick(4); i++ {
		props[fmt.Sprint("p", i)] = g.schema(depth - 1)
	}
	s["properties"] = props
	if len(props) > 0 && g.pick(2) == 0 {
		s["required"] = []string{"p0", "q"}
	}
	switch g.pick(4) {
	case 0:
		s["additionalProperties"] = false
	case 1:
		s["additionalProperties"] = g.schema(depth - 1)
	case 2:
		s["patternProperties"] = map[string]any{"^x": g.schema(depth - 1)}
	}
	if g.pick(3) == 0 {
		s["maxProperties"], s["minProperties"] = 4, 1
	}
}

func (g *gen) array(s map[string]any, depth int) {
	s["type"] = "array"
	tupleKw, addKw := "items", "additionalItems"
	if g.d != "http://json-schema.org/draft-07/schema#" {
		tupleKw, addKw = "prefixItems", "items"
	}
	if g.pick(2) == 0 {
		s[tupleKw] = []any{g.schema(depth - 1), g.schema(depth - 1)}
		s[addKw] = []any{false, true, map[string]any{"type": "number"}}[g.pick(3)]
	} else {
		s["items"] = g.schema(depth - 1)
	}
	s["maxItems"], s["uniqueItems"] = 3+g.pick(3), g.pick(2) == 0
}
