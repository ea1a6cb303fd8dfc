package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
)

// draftType is one event type of TestContractDraftsEndToEnd: its v1 and a
// compatible v2 in one JSON Schema draft, a v2 the registry refuses (with
// the Confluent rule it names), and events of each version the relay
// must pass or dead-letter by that draft's rules.
type draftType struct {
	typ, flag      string // flag: --draft given at registration
	v1, v2, breaks string
	rule           string // the rule the breaking v2 is refused with
	// events: version -> payload -> the pointer it fails at ("" passes)
	events map[int]map[string]string
}

var draftTypes = []draftType{
	{typ: "Tuple07", // no $schema: draft-07, as Confluent reads it
		v1:     `{"type":"object","required":["pos"],"properties":{"pos":{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":{"type":"string"}}}}`,
		v2:     `{"type":"object","required":["pos"],"properties":{"pos":{"type":"array","items":[{"type":"string"},{"type":"number"},{"type":"string"}],"additionalItems":true}}}`,
		breaks: `{"type":"object","required":["pos"],"properties":{"pos":{"type":"array","items":[{"type":"string"},{"type":"number"},{"type":"number"}],"additionalItems":{"type":"string"}}}}`,
		rule:   "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
		events: map[int]map[string]string{
			1: {`{"pos":["a",1,"b","c"]}`: "", `{"pos":["a","b"]}`: "/pos/1", `{"pos":["a",1,2]}`: "/pos/2"},
			2: {`{"pos":["a",1,"b",5]}`: "", `{"pos":["a",1,2]}`: "/pos/2"},
		}},
	{typ: "Deps07", // no $schema: draft-07's dependencies
		v1:     `{"type":"object","properties":{"card":{"type":"string"},"holder":{"type":"string"}},"dependencies":{"card":["holder"]}}`,
		v2:     `{"type":"object","properties":{"card":{"type":"string"},"holder":{"type":"string"}}}`,
		breaks: `{"type":"object","properties":{"card":{"type":"string"},"holder":{"type":"string"}},"dependencies":{"card":["holder","cvv"]}}`,
		rule:   "DEPENDENCY_ARRAY_EXTENDED",
		events: map[int]map[string]string{
			1: {`{"card":"4242","holder":"A"}`: "", `{"card":"4242"}`: "/holder"},
			2: {`{"card":"4242"}`: ""},
		}},
	{typ: "Bound04",
		v1:     `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"qty":{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":100}}}`,
		v2:     `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"qty":{"type":"integer","minimum":0,"exclusiveMinimum":true}}}`,
		breaks: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"qty":{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":50}}}`,
		rule:   "MAXIMUM_DECREASED",
		events: map[int]map[string]string{
			1: {`{"qty":1}`: "", `{"qty":0}`: "/qty", `{"qty":101}`: "/qty"},
			2: {`{"qty":500}`: "", `{"qty":0}`: "/qty"},
		}},
	{typ: "Const06",
		v1:     `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"kind":{"const":"order"},"tags":{"type":"array","contains":{"const":"x"}}}}`,
		v2:     `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"kind":{"const":"order"}}}`,
		breaks: `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"kind":{"const":"refund"},"tags":{"type":"array","contains":{"const":"x"}}}}`,
		rule:   "ENUM_ARRAY_CHANGED",
		events: map[int]map[string]string{
			1: {`{"kind":"order","tags":["y","x"]}`: "", `{"kind":"refund"}`: "/kind", `{"tags":["y"]}`: "/tags/0"},
			2: {`{"kind":"order","tags":["y"]}`: ""},
		}},
	{typ: "Tuple2019",
		v1:     `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"}],"additionalItems":false}},"dependentRequired":{"pair":["id"]}}`,
		v2:     `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}},"dependentRequired":{"pair":["id"]}}`,
		breaks: `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"}],"additionalItems":false}},"dependentRequired":{"pair":["id","ts"]}}`,
		rule:   "DEPENDENCY_ARRAY_EXTENDED",
		events: map[int]map[string]string{
			1: {`{"pair":["a"],"id":1}`: "", `{"pair":["a","b"],"id":1}`: "/pair", `{"pair":["a"]}`: "/id"},
			2: {`{"pair":["a",2],"id":1}`: "", `{"pair":["a","b"],"id":1}`: "/pair/1"},
		}},
	{typ: "Prefix2020", // named: prefixItems, and format only annotates
		v1:     `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"}],"items":false},"at":{"type":"string","format":"date-time"}}}`,
		v2:     `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}},"at":{"type":"string","format":"date-time"}}}`,
		breaks: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"integer"}],"items":false},"at":{"type":"string","format":"date-time"}}}`,
		rule:   "TYPE_CHANGED",
		events: map[int]map[string]string{
			1: {`{"pair":["a"],"at":"yesterday"}`: "", `{"pair":["a",1]}`: "/pair/1"},
			2: {`{"pair":["a",1,2]}`: "", `{"pair":["a","b"]}`: "/pair/1"},
		}},
	{typ: "Flag2020", flag: "2020-12", // no $schema, --draft 2020-12
		v1:     `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"code":{"$ref":"#/$defs/s","maxLength":3}}}`,
		v2:     `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"code":{"$ref":"#/$defs/s","maxLength":5}}}`,
		breaks: `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"code":{"$ref":"#/$defs/s","maxLength":2}}}`,
		rule:   "COMBINED_TYPE_SUBSCHEMAS_CHANGED", // $ref and maxLength: an allOf of two
		events: map[int]map[string]string{
			1: {`{"code":"abc"}`: "", `{"code":"abcd"}`: "/code", `{"code":1}`: "/code"},
			2: {`{"code":"abcd"}`: "", `{"code":"abcdef"}`: "/code"},
		}},
	{typ: "Format07", // no $schema: draft-07 asserts format, and ignores keywords beside $ref
		v1:     `{"type":"object","definitions":{"s":{"type":"string"}},"properties":{"at":{"type":"string","format":"date-time"},"code":{"$ref":"#/definitions/s","maxLength":3}}}`,
		v2:     `{"type":"object","definitions":{"s":{"type":"string"}},"properties":{"at":{"type":"string"},"code":{"$ref":"#/definitions/s"}}}`,
		breaks: `{"type":"object","definitions":{"s":{"type":"string","maxLength":3}},"properties":{"at":{"type":"string","format":"date-time"},"code":{"$ref":"#/definitions/s"}}}`,
		rule:   "MAX_LENGTH_ADDED",
		events: map[int]map[string]string{
			1: {`{"at":"2026-12-06T10:00:00Z","code":"abcdef"}`: "", `{"at":"yesterday"}`: "/at"},
			2: {`{"at":"yesterday"}`: ""},
		}},
}

// legacyV1 is a schema an earlier release registered without $schema,
// read as 2020-12 then and now; legacyV2, registered now without one, is
// draft-07 and says the same thing.
const (
	legacyV1 = `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"}],"items":false}},"dependentRequired":{"pair":["id"]}}`
	legacyV2 = `{"type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"}],"additionalItems":false}},"dependencies":{"pair":["id"]}}`
)

// TestContractDraftsEndToEnd: schemas of every draft, with and without
// $schema, registered, evolved (a compatible v2 accepted, a breaking one
// refused with Confluent's rule) and enforced by a real relay on events
// written by SQL: each event passes or reaches _dead_letter, at the
// pointer its draft's rules say. A registry holding a schema from before
// draft-07 was the default keeps reading it as 2020-12, says so once in
// the relay's log and in `relay contract show`, and reads the type's next
// version, registered without $schema, as draft-07.
func TestContractDraftsEndToEnd(t *testing.T) {
	ctx := context.Background()
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("drafts_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)
	register := func(want int, typ string, v int, schema, flag string) string {
		t.Helper()
		args := []string{"contract", "register", "--topic", "drafts", "--type", typ, "--version", fmt.Sprint(v),
			"--schema", file(fmt.Sprintf("%s-%d-%d.json", typ, v, rand.Uint32()), schema)}
		if flag != "" {
			args = append(args, "--draft", flag)
		}
		return cli(want, args...)
	}

	// The registry an earlier release left: v1 of Legacy, without $schema.
	key, err := catalog.Key(catalog.KindContract, "drafts", "Legacy", "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutIfAbsent(ctx, key, []byte(legacyV1)); err != nil {
		t.Fatal(err)
	}
	if out := cli(0, "contract", "show", "--topic", "drafts", "--type", "Legacy"); !strings.Contains(out, "JSON Schema 2020-12: registered without $schema") {
		t.Fatalf("show does not say the legacy schema is read as 2020-12:\n%s", out)
	}

	for _, dt := range draftTypes {
		register(0, dt.typ, 1, dt.v1, dt.flag)
		if out := register(1, dt.typ, 2, dt.breaks, dt.flag); !strings.Contains(out, dt.rule) {
			t.Fatalf("%s: the breaking v2 was not refused with %s:\n%s", dt.typ, dt.rule, out)
		}
		register(0, dt.typ, 2, dt.v2, dt.flag)
		register(0, dt.typ, 2, dt.v2, dt.flag) // again: nothing to do
	}
	// The legacy type's v2, without $schema: draft-07, judged against v1
	// read as 2020-12 (read as draft-07, v1 would have no dependency, and
	// v2's would be DEPENDENCY_ARRAY_ADDED, refused under BACKWARD).
	if out := register(0, "Legacy", 2, legacyV2, ""); !strings.Contains(out, "note: v2 of drafts/Legacy has no $schema and is read as JSON Schema draft-07") {
		t.Fatalf("register does not note the change of draft:\n%s", out)
	}
	if out := cli(0, "contract", "show", "--topic", "drafts", "--type", "Flag2020", "--version", "1"); !strings.Contains(out, `"$schema":"https://json-schema.org/draft/2020-12/schema"`) {
		t.Fatalf("show of a version registered with --draft 2020-12:\n%s", out)
	}

	p := startRelay(t, env, "--batch-max-delay", "20ms", "--contracts-poll", "500ms")
	waitSlotActive(t, db.DSN, slot, p)
	var passed []string
	refused := map[string]string{} // id -> the reason's start
	insert := func(typ string, version int, payload, failsAt string) {
		t.Helper()
		id := outbox.NewID()
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', 'drafts', 'k', '%s', %d, '%s')`, id, typ, version, payload))
		if failsAt == "" {
			passed = append(passed, id)
		} else {
			refused[id] = fmt.Sprintf("contract drafts/%s v%d at %q", typ, version, failsAt)
		}
	}
	for _, dt := range draftTypes {
		for _, v := range []int{1, 2} {
			docs := slices.Sorted(maps.Keys(dt.events[v]))
			for _, doc := range docs {
				insert(dt.typ, v, doc, dt.events[v][doc])
			}
		}
	}
	insert("Legacy", 1, `{"pair":["a"],"id":1}`, "")
	insert("Legacy", 1, `{"pair":["a",1],"id":1}`, "/pair/1") // prefixItems, items false: 2020-12
	insert("Legacy", 1, `{"pair":["a"]}`, "/id")
	insert("Legacy", 2, `{"pair":["a"],"id":2}`, "")
	insert("Legacy", 2, `{"pair":["a","b"],"id":2}`, "/pair") // additionalItems false: draft-07
	waitDrained(t, db.DSN, slot, time.Minute)

	if got := topicIDsSoFar(t, store, "drafts"); !slices.Equal(got, passed) {
		t.Fatalf("drafts holds %v,\nwant %v", got, passed)
	}
	reasons := deadLetters(t, env, url)
	for id, want := range refused {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("dead letter %s: reason %q, want %q", id, reasons[id], want)
		}
	}
	if n := strings.Count(p.output(), "is read as JSON Schema draft 2020-12, as when it was registered"); n != 1 {
		t.Errorf("the relay told of the legacy schema %d times, want once:\n%s", n, p.tail())
	}
	// A consumer validating what it reads reads each version in its draft.
	cli(0, "consume", "--topic", "drafts", "--group", "validate", "--validate")
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}
