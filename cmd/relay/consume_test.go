package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/check"
	"github.com/deltabus/deltabus/tests/grouptest"
)

// groupStore writes group m's table (topics m.a, m.b, m.c interleaved)
// in a fresh local store and returns its URL and the table.
func groupStore(t *testing.T) (string, *grouptest.Table) {
	t.Helper()
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := grouptest.New(t, root, "m", []string{"m.*"}, grouptest.Options{})
	t.Cleanup(g.Close)
	g.Commit("m.a", "m.b", "m.a")
	g.Commit("m.b", "m.c")
	g.Commit("m.c", "m.a", "m.b", "m.a")
	return "file://" + dir, g
}

// TestConsumeGroupedTopic: relay consume --topic of a topic of a group
// prints exactly its events, in order, with their positions in the group's
// table; a replay from a version of that table prints those from there.
func TestConsumeGroupedTopic(t *testing.T) {
	url, g := groupStore(t)
	vars := map[string]string{"DELTABUS_STORE": url}
	read := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runWithEnv(t, vars, append([]string{"consume", "--topic", "m.a", "--group", "g"}, args...)...)
		if code != exitOK {
			t.Fatalf("consume %v: exit %d: %s", args, code, errOut)
		}
		var ids []string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var l struct {
				ID      string `json:"event_id"`
				Topic   string `json:"topic"`
				Version int64  `json:"version"`
				Offset  int64  `json:"offset"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if pos := g.Positions[l.ID]; l.Topic != "m.a" || l.Version != pos[0] || l.Offset != pos[1] {
				t.Fatalf("line %s: want topic m.a at %d/%d", sc.Text(), pos[0], pos[1])
			}
			ids = append(ids, l.ID)
		}
		return ids
	}
	if got, want := read(), g.IDs("m.a"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("consume m.a printed %v, want %v", got, want)
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("a second consume printed %v, want nothing (checkpointed)", got)
	}
	if got, want := read("--from-version", "2"), g.IDs("m.a")[2:]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("replay from version 2 printed %v, want %v", got, want)
	}
}

// TestCheckConsumersGroupedTopic: relay check consumers shows a grouped
// topic's consumers on their group's table, each with its topic's own lag:
// a breach for the one behind on its topic, none for the one whose topic
// had nothing new, though the table went on by as many versions.
func TestCheckConsumersGroupedTopic(t *testing.T) {
	url, g := groupStore(t)
	vars := map[string]string{"DELTABUS_STORE": url}
	for _, topic := range []string{"m.a", "m.c"} {
		if code, _, errOut := runWithEnv(t, vars, "consume", "--topic", topic, "--group", "g"); code != exitOK {
			t.Fatalf("consume %s: exit %d: %s", topic, code, errOut)
		}
	}
	g.Commit("m.b", "m.a")
	g.Commit("m.a", "m.b")
	code, out, errOut := runWithEnv(t, vars, "check", "consumers", "--json", "--max-lag-versions", "1")
	var rows []check.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != exitFailure || len(rows) != 2 {
		t.Fatalf("check: exit %d, %v, %s %s", code, err, out, errOut)
	}
	for _, r := range rows {
		lag := map[string]int64{"m.a": 2, "m.c": 0}[r.Topic] // m.c's consumer read all of m.c
		if r.Table != g.Table || r.Version != 4 || r.LatestVersion != 5 || r.LagVersions != lag || (len(r.Breaches) > 0) != (lag > 1) ||
			len(r.Sources) != 1 || r.Sources[0].AppID != grouptest.AppID {
			t.Errorf("row %+v", r)
		}
	}
}
