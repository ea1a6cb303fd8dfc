package delta

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestProtocolGates(t *testing.T) {
	plain := Metadata{SchemaString: testSchema}
	cm := Metadata{SchemaString: testSchema, Configuration: map[string]string{"delta.columnMapping.mode": "name"}}
	inv := Metadata{SchemaString: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.invariants":"{}"}}]}`}
	for _, c := range []struct {
		name  string
		p     Protocol
		m     Metadata
		read  string // "" = readable
		write string // "" = writable
	}{
		{"topic", topicProtocol, plain, "", ""},
		{"legacy 1/2", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, plain, "", ""},
		{"legacy 1/4", Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, plain, "", ""},
		{"reader 99", Protocol{MinReaderVersion: 99, MinWriterVersion: 7}, plain,
			"table requires reader version 99; this reader supports up to 3", "reader version 99"},
		{"dv", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, plain,
			`reader feature "deletionVectors"`, "deletionVectors"},
		{"v2Checkpoint", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"v2Checkpoint"}}, plain, `"v2Checkpoint"`, "v2Checkpoint"},
		{"catalogManaged", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"catalogManaged"}}, plain, `"catalogManaged"`, "catalogManaged"},
		{"column mapping name", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, cm, `column mapping mode "name"`, "column mapping"},
		{"column mapping none", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, plain, "", ""},
		{"writer 8", Protocol{MinReaderVersion: 1, MinWriterVersion: 8}, plain, "", "writer version 8"},
		{"unknown writer feature", Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"rowTracking"}}, plain, "", `"rowTracking"`},
		{"invariants used", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, inv, "", `"invariants"`},
		{"constraints used", Protocol{MinReaderVersion: 1, MinWriterVersion: 3},
			Metadata{SchemaString: testSchema, Configuration: map[string]string{"delta.constraints.x": "a > 0"}}, "", `"checkConstraints"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(what string, err error, want string) {
				if want == "" && err != nil {
					t.Errorf("%s: unexpected %v", what, err)
				}
				if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Errorf("%s: err = %v, want one naming %q", what, err, want)
				}
			}
			check("read", CheckReadable(c.p, c.m), c.read)
			check("write", CheckWritable(c.p, c.m), c.write)
		})
	}
}

func TestCommitInfoJSON(t *testing.T) {
	in := `{"timestamp":1712345678901,"operation":"OPTIMIZE","operationParameters":{"auto":false,"zOrderBy":"[]"},` +
		`"inCommitTimestamp":9007199254740993,"txnId":"abc","x":{"y":[1,2.5]}}`
	var ci CommitInfo
	if err := json.Unmarshal([]byte(in), &ci); err != nil {
		t.Fatal(err)
	}
	if *ci.Timestamp != 1712345678901 || *ci.InCommitTimestamp != 9007199254740993 || ci.TxnID != "abc" || ci.Operation() != "OPTIMIZE" {
		t.Fatalf("parsed %+v", ci)
	}
	out, err := json.Marshal(ci)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), `{"inCommitTimestamp":9007199254740993,`) || !strings.Contains(string(out), `"auto":false`) ||
		!strings.Contains(string(out), `"x":{"y":[1,2.5]}`) {
		t.Errorf("re-encoded %s", out)
	}
	var lenient CommitInfo
	if err := json.Unmarshal([]byte(`{"timestamp":"soon","txnId":5}`), &lenient); err != nil || lenient.Timestamp != nil {
		t.Errorf("lenient parse: %+v %v", lenient, err)
	}
}
