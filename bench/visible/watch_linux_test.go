//go:build linux

package visible

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// watching waits until v watches the folder rel (relative to its root).
func watching(t *testing.T, v *Watcher, rel string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		for _, d := range v.dirs {
			if d == rel {
				v.mu.Unlock()
				return
			}
		}
		v.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s is not watched after 10s", rel)
}

func TestVisibilityTimesWhenACommitGetsItsName(t *testing.T) {
	root := t.TempDir()
	// A table made before the watch, with a commit: not seen, its ctime.
	early := filepath.Join(root, "early", "_delta_log")
	if err := os.MkdirAll(early, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(early, "00000000000000000001.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := Watch(root)
	if err != nil {
		t.Fatal(err)
	}
	defer v.End()
	// Tables made after, in one MkdirAll (the watch finds _delta_log by
	// looking), a topic's and a group's.
	for _, table := range []string{"orders", "_group.quiet"} {
		if err := os.MkdirAll(filepath.Join(root, table, "_delta_log"), 0o755); err != nil {
			t.Fatal(err)
		}
		watching(t, v, filepath.Join(table, "_delta_log"))
	}
	logDir := filepath.Join(root, "orders", "_delta_log")
	// A put-if-absent: a temporary file, then link(2) to the commit's name.
	tmp := filepath.Join(logDir, ".00000000000000000001.json.x.tmp")
	if err := os.WriteFile(tmp, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := os.Link(tmp, filepath.Join(logDir, "00000000000000000001.json")); err != nil {
		t.Fatal(err)
	}
	// A rename(2) in the group's table.
	gtmp := filepath.Join(root, "_group.quiet", "_delta_log", ".g.tmp")
	if err := os.WriteFile(gtmp, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(gtmp, filepath.Join(root, "_group.quiet", "_delta_log", "00000000000000000002.json")); err != nil {
		t.Fatal(err)
	}
	if err := v.End(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, c := range []struct{ table, key string }{
		{"orders", "_delta_log/00000000000000000001.json"},
		{"_group.quiet", "_delta_log/00000000000000000002.json"},
	} {
		at, seen, err := v.At(c.table, c.key)
		if err != nil || !seen {
			t.Fatalf("%s %s: seen %v, err %v; want seen", c.table, c.key, seen, err)
		}
		if at.Before(before) || at.After(after) {
			t.Errorf("%s %s: seen at %v, outside [%v, %v]", c.table, c.key, at, before, after)
		}
	}
	at, seen, err := v.At("early", "_delta_log/00000000000000000001.json")
	if err != nil || seen || at.IsZero() {
		t.Errorf("commit made before the watch: at %v seen %v err %v; want its ctime, not seen", at, seen, err)
	}
	if _, ok := v.seen["orders/_delta_log/.00000000000000000001.json.x.tmp"]; ok {
		t.Error("a temporary file was recorded as a commit")
	}
	if _, _, err := v.At("orders", "_delta_log/00000000000000000009.json"); err == nil {
		t.Error("a commit that does not exist: want an error")
	}
}

// An S3 server keeping objects as files may remove the store's folder once
// it is empty and make it again with the next object: the watch follows.
func TestVisibilityFollowsARootMadeAgain(t *testing.T) {
	root := filepath.Join(t.TempDir(), "prefix")
	if err := os.MkdirAll(filepath.Join(root, "_deltabus"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := Watch(root)
	if err != nil {
		t.Fatal(err)
	}
	defer v.End()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(root, "orders", "_delta_log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	watching(t, v, filepath.Join("orders", "_delta_log"))
	before := time.Now()
	if err := os.WriteFile(filepath.Join(logDir, "00000000000000000001.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := v.End(); err != nil {
		t.Fatal(err)
	}
	at, seen, err := v.At("orders", "_delta_log/00000000000000000001.json")
	if err != nil || !seen || at.Before(before) {
		t.Fatalf("commit in the root made again: at %v (before %v), seen %v, err %v", at, before, seen, err)
	}
}
