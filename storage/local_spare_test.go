//go:build linux

package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func readySpares(l *Local) int {
	l.spares.mu.Lock()
	defer l.spares.mu.Unlock()
	n := 0
	for _, sp := range l.spares.byDir {
		if sp.f != nil {
			n++
		}
	}
	return n
}

// TestSparesAreMadeAndUsed: a directory's second put leaves a spare for its
// third, which a put in a directory removed and made again still names
// correctly; Close releases it.
func TestSparesAreMadeAndUsed(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	put := func(key string) {
		t.Helper()
		if err := l.PutIfAbsent(ctx, key, []byte(key)); err != nil {
			t.Fatal(err)
		}
		l.spares.wait()
	}
	put("d/1")
	if n := readySpares(l); n != 0 {
		t.Fatalf("after a directory's first put: %d spares, want none", n)
	}
	put("d/2")
	if n := readySpares(l); n != 1 {
		t.Fatalf("after a directory's second put: %d spares, want 1", n)
	}
	if err := os.RemoveAll(filepath.Join(l.Root(), "d")); err != nil {
		t.Fatal(err)
	}
	put("d/3") // the spare was made in the removed directory
	got, err := l.Get(ctx, "d/3")
	if err != nil || string(got) != "d/3" {
		t.Fatalf("Get(d/3) = %q, %v", got, err)
	}
	if err := l.PutIfAbsent(ctx, "d/3", []byte("other")); err == nil {
		t.Fatal("PutIfAbsent over an existing key through a spare succeeded")
	}
	l.spares.wait()
	if n := readySpares(l); n != 1 {
		t.Fatalf("after later puts: %d spares, want 1", n)
	}
	l.Close()
	if n := readySpares(l); n != 0 {
		t.Fatalf("after Close: %d spares, want none", n)
	}
	put("d/4") // still usable
}
