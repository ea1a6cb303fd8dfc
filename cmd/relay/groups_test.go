package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
)

// TestGroupsCreateAndList: a group is created once, listed with its table,
// patterns, interval and the topics that joined it; a matching topic that
// already had its own table is named as keeping it, and stays there.
func TestGroupsCreateAndList(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"DELTABUS_STORE": "file://" + dir}
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Batch(t, root, "deltabus-1-s", 100, "iot.old") // its own table, before the group
	code, out, errOut := runWithEnv(t, vars, "groups", "create", "iot", "--topics", "iot.*, audit.?", "--commit-interval", "900ms")
	if code != exitOK || !strings.Contains(out, "_group.iot") || !strings.Contains(out, "keep them: iot.old") {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	grouptest.Batch(t, root, "deltabus-1-s", 200, "iot.new", "audit.x", "orders", "iot.old")
	if code, out, errOut = runWithEnv(t, vars, "groups", "create", "iot", "--topics", "iot.*,audit.?", "--commit-interval", "900ms"); code != exitOK {
		t.Fatalf("the same group again: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runWithEnv(t, vars, "groups", "--json")
	var got struct {
		Groups []groupInfo `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got.Groups) != 1 {
		t.Fatalf("groups --json: exit %d, %v: %s", code, err, out)
	}
	g := got.Groups[0]
	if g.Table != "_group.iot" || g.CommitInterval != "900ms" || !slices.Equal(g.Patterns, []string{"iot.*", "audit.?"}) ||
		!slices.Equal(g.Members, []string{"audit.x", "iot.new"}) {
		t.Fatalf("group listed as %+v", g)
	}
	if p, err := catalog.Locate(context.Background(), root, "iot.old"); err != nil || p.Shared() {
		t.Fatalf("iot.old placed %+v (%v), want its own table still", p, err)
	}
	if code, out, _ = runWithEnv(t, vars, "groups"); code != exitOK || !strings.Contains(out, "audit.x,iot.new") {
		t.Fatalf("groups: exit %d\n%s", code, out)
	}
}

// TestGroupsBadInput: a bad group is one line, exit 2, and writes nothing;
// a group's definition cannot be changed.
func TestGroupsBadInput(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"DELTABUS_STORE": "file://" + dir}
	for _, args := range [][]string{
		{"groups", "create", "Iot", "--topics", "iot.*"},
		{"groups", "create", "_iot", "--topics", "iot.*"},
		{"groups", "create", "iot"},
		{"groups", "create", "iot", "--topics", "[unclosed"},
		{"groups", "create", "iot", "--topics", "_dead_letter"},
		{"groups", "create", "iot", "--topics", "iot.*", "--commit-interval", "-1s"},
		{"groups", "create", "--topics", "iot.*"},
		{"groups", "create", "a", "b", "--topics", "iot.*"},
	} {
		refusedWhole(t, vars, args...)
	}
	nothingWritten(t, dir)
	if code, _, errOut := runWithEnv(t, vars, "groups", "create", "iot", "--topics", "iot.*"); code != exitOK {
		t.Fatalf("create: %s", errOut)
	}
	code, out, errOut := runWithEnv(t, vars, "groups", "create", "iot", "--topics", "other.*")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "fixed once created") {
		t.Fatalf("a changed group: exit %d, %q %q", code, out, errOut)
	}
}
