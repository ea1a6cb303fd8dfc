package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// groupedStore is a store with group "m" (topics m.*) whose topics and
// topic "orders" (its own table) the relay's Delta sink wrote.
type groupedStore struct {
	t     *testing.T
	dir   string
	root  storage.Store
	sink  *deltasink.Sink
	appID string
	ids   map[string][]string // each topic's event ids, in commit order
	lsn   int64
	last  map[string]int64 // each topic's last commit position
}

func newGroupedStore(t *testing.T, appID string) *groupedStore {
	t.Helper()
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.WriteGroup(context.Background(), root, catalog.Group{Name: "m", Topics: []string{"m.*"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return &groupedStore{t: t, dir: dir, root: root, appID: appID, ids: map[string][]string{}, lsn: 0x16B0000, last: map[string]int64{},
		sink: deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true})}
}

// source returns the relay of another source writing to the same store.
func (g *groupedStore) source(appID string) *groupedStore {
	o := *g
	o.appID, o.ids, o.last = appID, map[string][]string{}, map[string]int64{}
	o.sink = deltasink.New(g.root, deltasink.Options{AppID: appID, SyncCheckpoints: true})
	return &o
}

// commit writes one batch: n events of each topic, interleaved, each
// table's commit at the batch's position, which it returns.
func (g *groupedStore) commit(n int, topics ...string) int64 {
	g.t.Helper()
	ctx := context.Background()
	b := g.sink.NewBatch()
	tables := map[string]bool{}
	for i := 0; i < n; i++ {
		for _, name := range topics {
			tp, err := g.sink.Open(ctx, name)
			if err != nil {
				g.t.Fatal(err)
			}
			tables[tp.Table] = true
			g.lsn += 0x100
			ev := outbox.Event{ID: uuid.NewString(), Topic: name, Key: "k", Type: "created", SchemaVersion: 1,
				Payload: fmt.Sprintf(`{"n":%d}`, i), OccurredAt: time.Now().UTC().Truncate(time.Microsecond),
				CommitLSN: g.lsn, Xid: 700, CommitTime: time.Now().UTC()}
			if err := b.Append(&ev); err != nil {
				g.t.Fatal(err)
			}
			g.ids[name] = append(g.ids[name], ev.ID)
		}
	}
	for _, name := range topics {
		g.last[name] = g.lsn
	}
	for table := range tables {
		if _, err := b.Commit(ctx, table, g.lsn); err != nil {
			g.t.Fatal(err)
		}
	}
	return g.lsn
}

// tailIDs runs relay tail and returns the event ids and topics it printed.
func tailIDs(t *testing.T, vars map[string]string, args ...string) (ids, topics []string) {
	t.Helper()
	code, out, errOut := runWithEnv(t, vars, append([]string{"tail"}, args...)...)
	if code != 0 || errOut != "" {
		t.Fatalf("tail %v: exit %d, stderr %q", args, code, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row struct {
			ID      string          `json:"event_id"`
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.ID == "" || !json.Valid(row.Payload) {
			t.Fatalf("tail %v: line %q: %v", args, sc.Text(), err)
		}
		ids, topics = append(ids, row.ID), append(topics, row.Topic)
	}
	return ids, topics
}

// TestTailOfAGroupedTopic: `relay tail --topic T` prints exactly T's rows,
// in commit order, from its group's table, reading none of the files that
// hold only other topics; the group's table is tailed (all its topics, or
// one with --topic) and inspected as any Delta table.
func TestTailOfAGroupedTopic(t *testing.T) {
	g := newGroupedStore(t, "deltabus-1-deltabus")
	g.commit(3, "m.a", "m.b", "orders")
	g.commit(2, "m.b", "m.a")
	g.commit(4, "m.a") // a file of m.a alone
	vars := map[string]string{"DELTABUS_STORE": "file://" + g.dir}
	for _, name := range []string{"m.a", "m.b", "orders"} {
		ids, topics := tailIDs(t, vars, "--topic", name)
		if !slices.Equal(ids, g.ids[name]) || slices.ContainsFunc(topics, func(s string) bool { return s != name }) {
			t.Errorf("tail --topic %s: %d rows %v, want its %d rows in order", name, len(ids), topics, len(g.ids[name]))
		}
	}
	groupURL := "file://" + g.dir + "/_group.m"
	ids, _ := tailIDs(t, nil, groupURL)
	if want := slices.Concat(g.ids["m.a"], g.ids["m.b"]); len(ids) != len(want) {
		t.Errorf("tail of the group table: %d rows, want %d", len(ids), len(want))
	}
	if ids, _ := tailIDs(t, nil, groupURL, "--topic", "m.b"); !slices.Equal(ids, g.ids["m.b"]) {
		t.Errorf("tail of the group table --topic m.b: %d rows, want %d", len(ids), len(g.ids["m.b"]))
	}
	code, out, errOut := runWithEnv(t, nil, "inspect", groupURL)
	records := regexp.MustCompile(`(?m)^records +(\d+)$`).FindStringSubmatch(out)
	if code != 0 || !regexp.MustCompile(`(?m)^txn +deltabus-1-deltabus/m\.a=\d+\ntxn +deltabus-1-deltabus/m\.b=\d+$`).MatchString(out) ||
		records == nil || records[1] != fmt.Sprint(len(g.ids["m.a"])+len(g.ids["m.b"])) {
		t.Errorf("inspect of the group table: exit %d\n%s%s", code, out, errOut)
	}

	// The file of m.a alone is gone: m.b's tail never reads it, m.a's fails.
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(g.root, "_group.m"), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Files {
		if strings.Contains(a.Stats, `"minValues":{"topic":"m.a"`) && strings.Contains(a.Stats, `"maxValues":{"topic":"m.a"`) {
			if err := storage.Sub(g.root, "_group.m").Delete(context.Background(), a.Path); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ids, _ := tailIDs(t, vars, "--topic", "m.b"); !slices.Equal(ids, g.ids["m.b"]) {
		t.Errorf("tail --topic m.b after another topic's file was deleted: %d rows, want %d", len(ids), len(g.ids["m.b"]))
	}
	if code, _, errOut := runWithEnv(t, vars, "tail", "--topic", "m.a"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("tail --topic m.a with its file deleted: exit %d, stderr %q", code, errOut)
	}
}

// TestTailBadInput: what relay tail cannot tail is one line, exit 2,
// nothing printed.
func TestTailBadInput(t *testing.T) {
	g := newGroupedStore(t, "deltabus-1-deltabus")
	g.commit(1, "m.a")
	store := "file://" + g.dir
	for _, c := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"tail", "--topic", "m.a"}, "DELTABUS_STORE"},
		{nil, []string{"tail", store + "/_group.m", "--store", store, "--topic", "m.a"}, "not both"},
		{nil, []string{"tail", "--store", store, "--topic", "m.zz"}, "not registered"},
		{nil, []string{"tail", "--store", store, "--topic", "Bad/Topic"}, "invalid"},
	} {
		code, out, errOut := runWithEnv(t, c.vars, c.args...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line naming %q", c.args, code, out, errOut, c.want)
		}
	}
}
