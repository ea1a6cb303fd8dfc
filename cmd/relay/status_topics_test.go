package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// statusDB is a migrated source database with the relay's slot.
func statusDB(t *testing.T) *pgtest.DB {
	t.Helper()
	db := pgtest.NewDB(t)
	if _, err := migrations.Apply(context.Background(), db.Conn(t), migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `SELECT pg_create_logical_replication_slot('deltabus', 'pgoutput')`)
	return db
}

// TestStatusOfGroupedTopics: relay status shows each grouped topic at the
// position this source's relay committed it (its txn appId/topic in the
// group's table, not another topic's nor another source's), the table it
// lives in, its own files and records, and each group's table once.
func TestStatusOfGroupedTopics(t *testing.T) {
	db := statusDB(t)
	g := newGroupedStore(t, db.AppID(t, "deltabus"))
	g.commit(3, "m.a", "m.b", "orders")
	g.commit(2, "m.b", "m.a")
	g.commit(4, "m.a")
	g.commit(2, "m.c")
	other := g.source("deltabus-2-other") // its position of m.b is its own
	other.lsn += 0x100000
	other.commit(1, "m.b")
	posA, posB, posC := g.last["m.a"], g.last["m.b"], g.last["m.c"]

	vars := map[string]string{"DELTABUS_SOURCE": db.DSN, "DELTABUS_STORE": "file://" + g.dir}
	code, out, errOut := runWithEnv(t, vars, "status", "--json", "--relay-addr", "")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(g.root, "_group.m"), -1)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := delta.LoadSnapshot(context.Background(), storage.Sub(g.root, "orders"), -1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]topicStatus{
		"m.a":    {Topic: "m.a", Table: "_group.m", Group: "m", Version: snap.Version, TxnVersion: lsnString(posA), Files: 3, Records: 4, SharedRecords: 10},
		"m.b":    {Topic: "m.b", Table: "_group.m", Group: "m", Version: snap.Version, TxnVersion: lsnString(posB), Files: 3, Records: 1, SharedRecords: 10},
		"m.c":    {Topic: "m.c", Table: "_group.m", Group: "m", Version: snap.Version, TxnVersion: lsnString(posC), Files: 1, Records: 2},
		"orders": {Topic: "orders", Version: orders.Version, TxnVersion: lsnString(g.last["orders"]), Files: 1, Records: 3},
	}
	if len(rep.Topics) != len(want) {
		t.Fatalf("status lists %d topics, want %d:\n%s", len(rep.Topics), len(want), out)
	}
	for _, ts := range rep.Topics {
		if ts != want[ts.Topic] {
			t.Errorf("status of %s:\n got %+v\nwant %+v", ts.Topic, ts, want[ts.Topic])
		}
	}
	wantGroup := groupStatus{Group: "m", Table: "_group.m", Version: snap.Version, Files: len(snap.Files), Records: 17, Topics: 3}
	if len(rep.Groups) != 1 || rep.Groups[0] != wantGroup {
		t.Fatalf("groups %+v, want [%+v]", rep.Groups, wantGroup)
	}

	code, out, errOut = runWithEnv(t, vars, "status", "--relay-addr", "")
	for _, line := range []string{`(?m)^TOPIC +TABLE +VERSION +TXN LSN +FILES +RECORDS +PROBLEM$`,
		`(?m)^m\.a +_group\.m +\d+ +` + regexp.QuoteMeta(lsnString(posA)) + ` +3 +shared +$`,
		`(?m)^m\.c +_group\.m +\d+ +` + regexp.QuoteMeta(lsnString(posC)) + ` +1 +2 +$`,
		`(?m)^orders +- +\d+ +` + regexp.QuoteMeta(lsnString(g.last["orders"])) + ` +1 +3 +$`,
		`(?m)^m +_group\.m +3 +\d+ +\d+ +17 +$`} {
		if code != 0 || !regexp.MustCompile(line).MatchString(out) {
			t.Errorf("status: exit %d, no line %s in:\n%s%s", code, line, out, errOut)
		}
	}
}

// countingGets counts the reads of one key.
type countingGets struct {
	storage.Store
	key string
	n   atomic.Int64
}

func (s *countingGets) Get(ctx context.Context, key string) ([]byte, error) {
	if key == s.key {
		s.n.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// TestStatusReadsAGroupTableOnce: the topics of a group, and the group's
// line, come from one reading of its table's log.
func TestStatusReadsAGroupTableOnce(t *testing.T) {
	g := newGroupedStore(t, "deltabus-1-deltabus")
	g.commit(2, "m.a", "m.b", "m.c", "m.d")
	cs := &countingGets{Store: g.root, key: "_group.m/" + delta.CommitKey(0)}
	topics, groups, err := topicStatuses(context.Background(), cs, g.appID)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 4 || len(groups) != 1 || cs.n.Load() != 1 {
		t.Fatalf("%d topics, %d groups, the group table's first commit read %d times; want 4, 1, once", len(topics), len(groups), cs.n.Load())
	}
	for _, ts := range topics {
		if ts.Table != "_group.m" || !strings.HasPrefix(ts.TxnVersion, "0/") || ts.Problem != "" {
			t.Errorf("%+v", ts)
		}
	}
}
