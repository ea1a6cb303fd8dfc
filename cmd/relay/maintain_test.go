package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/maintain"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// maintainedStore is a store with group m (topics m.*) whose topics m.a and
// m.b, and the topic orders, have each had `batches` relay commits.
func maintainedStore(t *testing.T, batches int) (map[string]string, storage.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.WriteGroup(ctx, root, catalog.Group{Name: "m", Topics: []string{"m.*"}}); err != nil {
		t.Fatal(err)
	}
	s := deltasink.New(root, deltasink.Options{AppID: "deltabus-test", SyncCheckpoints: true})
	defer s.Close(ctx)
	tables := map[string]bool{}
	for _, name := range []string{"m.a", "m.b", "orders"} {
		tp, err := s.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tables[tp.Table] = true
	}
	for b := range batches {
		batch := s.NewBatch()
		pos := int64(1000 + b*100)
		for i, name := range []string{"m.a", "m.b", "orders"} {
			ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", b*3+i), Topic: name, Key: "k", Type: "t",
				SchemaVersion: 1, Payload: `{}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: pos, Seq: int32(i), CommitTime: time.Now().UTC()}
			if err := batch.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
		for table := range tables {
			if _, err := batch.Commit(ctx, table, pos); err != nil {
				t.Fatal(err)
			}
		}
	}
	return map[string]string{"DELTABUS_STORE": "file://" + dir}, root
}

// TestRetentionOfAGroupTable: a group's table has one retention, shared
// by its topics: `--topic` of a grouped topic shows it and refuses to set
// it (one line naming the --group form, nothing written); `--group` sets
// it, and every topic of the group then shows it; a topic's own table is
// set by --topic as before.
func TestRetentionOfAGroupTable(t *testing.T) {
	vars, root := maintainedStore(t, 2)
	ctx := context.Background()
	version := func() int64 {
		snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, "_group.m"), -1)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Version
	}
	v0 := version()
	code, out, errOut := runWithEnv(t, vars, "retention", "--topic", "m.a")
	if code != exitOK || !strings.Contains(out, "topic m.a (group m, table _group.m") || !strings.Contains(out, "delta.deletedFileRetentionDuration = interval 7 days (default)") {
		t.Fatalf("show a grouped topic's retention: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runWithEnv(t, vars, "retention", "--topic", "m.a", "--files", "48h", "--log", "720h")
	if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "group m") || !strings.Contains(errOut, "`relay retention --group m --log 720h --files 48h`") {
		t.Fatalf("set a grouped topic's retention: exit %d, stdout %q, stderr %q; want one line naming the --group form", code, out, errOut)
	}
	if v := version(); v != v0 {
		t.Fatalf("the refused command wrote version %d of the group's table", v)
	}
	code, out, errOut = runWithEnv(t, vars, "retention", "--group", "m", "--files", "48h")
	if code != exitOK || !strings.Contains(out, "group m (table _group.m") || !strings.Contains(out, "delta.deletedFileRetentionDuration = interval 2 days") {
		t.Fatalf("set the group's retention: %d %q %q", code, out, errOut)
	}
	code, out, _ = runWithEnv(t, vars, "retention", "--topic", "m.b")
	if code != exitOK || !strings.Contains(out, "delta.deletedFileRetentionDuration = interval 2 days") || !strings.Contains(out, "delta.logRetentionDuration = interval 30 days,") {
		t.Fatalf("another topic of the group after --group set it: %d %q", code, out)
	}
	code, out, _ = runWithEnv(t, vars, "retention", "--topic", "orders", "--log", "240h")
	if code != exitOK || out != "topic orders: delta.logRetentionDuration = interval 10 days, delta.deletedFileRetentionDuration = interval 7 days (default)\n" {
		t.Fatalf("a topic's own table: %d %q", code, out)
	}
	code, out, _ = runWithEnv(t, vars, "retention", "--topic", "m.new")
	if code != exitOK || !strings.Contains(out, "topic m.new (group m, table _group.m") {
		t.Fatalf("a topic the group would place: %d %q", code, out)
	}
	code, _, errOut = runWithEnv(t, vars, "retention", "--topic", "other")
	if code != exitFailure || !strings.Contains(errOut, "topic other has no table yet") {
		t.Fatalf("a topic without a table: %d %q", code, errOut)
	}
}

// TestMaintainCommandsBadInput: bad flags are one line, exit 2, nothing
// written.
func TestMaintainCommandsBadInput(t *testing.T) {
	vars, root := maintainedStore(t, 3)
	ctx := context.Background()
	list := func() string {
		objs, err := root.List(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		return strings.Join(keys, "\n")
	}
	before := list()
	for _, args := range [][]string{
		{"retention"},
		{"retention", "--topic", "m.a", "--group", "m"},
		{"retention", "--topic", "m.a", "--topic", "m.b"},
		{"retention", "--group", "nosuch", "--log", "240h"},
		{"retention", "--group", "_m", "--log", "240h"},
		{"retention", "--topic", "../etc", "--log", "240h"},
		{"retention", "--topic", "m.a", "--log", "240h"},
		{"compact", "--group", "nosuch"},
		{"compact", "--topic", "Bad/Name"},
		{"vacuum", "--group", "x/y"},
	} {
		code, out, errOut := runWithEnv(t, vars, args...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "relay: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if after := list(); after != before {
		t.Fatalf("bad input wrote to the store:\n%s\nwas\n%s", after, before)
	}
}

// TestCompactAndVacuumByGroup: `relay compact --group G` and `--topic T`
// of a grouped topic work on the group's table, once; the report names
// the table and its group.
func TestCompactAndVacuumByGroup(t *testing.T) {
	vars, _ := maintainedStore(t, 5)
	code, out, errOut := runWithEnv(t, vars, "compact", "--group", "m", "--topic", "m.b", "--json")
	var rep maintain.Report
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Tables) != 1 {
		t.Fatalf("compact --group m --topic m.b: %d %q %q", code, out, errOut)
	}
	if g := rep.Tables[0]; g.Table != "_group.m" || g.Group != "m" || g.Compacted != 5 || g.Written != 2 || strings.Join(g.Topics, ",") != "m.a,m.b" {
		t.Fatalf("the group's table: %+v; want its 5 files compacted into one a topic", g)
	}
	code, out, errOut = runWithEnv(t, vars, "vacuum", "--topic", "m.a", "--dry-run")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], "TABLE ") || !strings.HasPrefix(lines[1], "_group.m ") {
		t.Fatalf("vacuum --topic m.a: %d %q %q; want the group's table", code, out, errOut)
	}
	code, out, _ = runWithEnv(t, vars, "compact")
	if code != exitOK || !strings.Contains(out, "_group.m ") || !strings.Contains(out, "\norders ") || strings.Count(out, "\n") != 3 {
		t.Fatalf("compact of every table: %d %q", code, out)
	}
}
