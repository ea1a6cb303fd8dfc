package topic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/duckdbtest"
)

// duckdbDir finds DuckDB's node client (duckdbtest.Dir).
func duckdbDir(t *testing.T) string { return duckdbtest.Dir(t) }

// commitJSON writes version v of a table's log with put-if-absent.
func commitJSON(t *testing.T, tbl storage.Store, v int64, actions []delta.Action) {
	t.Helper()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"commitInfo":{"timestamp":%d,"operation":"WRITE","engineInfo":"deltabus-test"}}`+"\n", time.Now().UnixMilli())
	for _, a := range actions {
		line, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	key := fmt.Sprintf("_delta_log/%020d.json", v)
	if err := tbl.PutIfAbsent(context.Background(), key, buf.Bytes()); err != nil {
		t.Fatalf("commit %s: %v", key, err)
	}
}

func createTable(t *testing.T, tbl storage.Store, topic string) {
	md, proto := NewTableMetadata(topic)
	commitJSON(t, tbl, 0, []delta.Action{{Protocol: &proto}, {Metadata: &md}})
}

// appendCommit writes rows as data files and commits them at version v
// with a txn of the last commit LSN.
func appendCommit(t *testing.T, tbl storage.Store, v int64, opts FileOptions, evs []outbox.Event) {
	adds := writeEvents(t, tbl, opts, evs)
	acts := make([]delta.Action, 0, len(adds)+1)
	for i := range adds {
		acts = append(acts, delta.Action{Add: &adds[i]})
	}
	last := time.Now().UnixMilli()
	acts = append(acts, delta.Action{Txn: &delta.Txn{AppID: "deltabus-test", Version: evs[len(evs)-1].CommitLSN, LastUpdated: &last}})
	commitJSON(t, tbl, v, acts)
}

type duckTable struct {
	Actions []struct {
		Version int64 `json:",string"`
		Action  string
	}
	Protocol []struct {
		MinReaderVersion int
		MinWriterVersion int
		WriterFeatures   []string
		ReaderFeatures   []string
	}
	Configuration []struct{ Key, Type, Value string }
	Metadata      []struct {
		ID, Name, Provider, PartitionColumnsType string
		PartitionColumns                         int `json:",string"`
	}
	Schema []struct {
		Name, Type string
		Nullable   bool
	}
	Txns []struct {
		Version           int64 `json:",string"`
		AppID, TxnVersion string
	}
	Adds []struct {
		Version                                                               int64 `json:",string"`
		Path, Size, PartitionValuesType, StatsType                            string
		StatsValid, DataChange                                                bool
		NumRecords, MinLSN, MaxLSN, MinOccurredAt, MaxOccurredAt, NullHeaders string
	}
	Files []struct {
		Path, Rows, MinLSN, MaxLSN, MinOccurredAt, MaxOccurredAt, NullHeaders string
		Columns                                                               []struct{ Name, Type string }
		ParquetSchema                                                         []struct{ Name, Type, Repetition, Logical string }
		Codecs                                                                []string
	}
	Rows     []map[string]any
	Snapshot duckSnapshot
}

// duckSnapshot is the table as DuckDB replays its log: the newest
// checkpoint, then the JSON commits after it.
type duckSnapshot struct {
	CheckpointVersion int64
	Commits           []int64
	Files             []struct {
		Path, Size, Stats string
		DataChange        bool
	}
	Tombstones int
	Txns       map[string]string
	Protocol   struct {
		MinReaderVersion, MinWriterVersion int
		WriterFeatures                     []string
	}
	SchemaString  string
	Configuration map[string]string
	Rows          []map[string]any
	Ordered       bool // every file's rows are in (commit_lsn, seq) order
}

func runDuckDB(t *testing.T, dirs ...string) map[string]duckTable {
	t.Helper()
	pkg := duckdbDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"testdata/duckdb_check.mjs", pkg}, dirs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb_check.mjs: %v\n%s", err, stderr.String())
	}
	res := map[string]duckTable{}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("duckdb output: %v\n%.2000s", err, out)
	}
	return res
}
