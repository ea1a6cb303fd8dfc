package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/storage/storagetest"
)

func newLocal(t *testing.T) *storage.Local {
	t.Helper()
	l, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return newLocal(t) })
}

// TestLocalTempFilesHidden: files shaped like our temporaries (left by a
// crash) are not listed, and such names are refused as keys.
func TestLocalTempFilesHidden(t *testing.T) {
	l := newLocal(t)
	if err := l.Put(t.Context(), "_delta_log/00000000000000000000.json", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	crashLeft := ".00000000000000000001.json.0b7c3c4e-0d7e-4b0a-9f57-1f1e2d3c4b5a.tmp"
	if err := os.WriteFile(filepath.Join(l.Root(), "_delta_log", crashLeft), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := l.List(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "_delta_log/00000000000000000000.json" {
		t.Fatalf("List = %+v, want only the committed object", objs)
	}
	if err := l.Put(t.Context(), "_delta_log/"+crashLeft, nil); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("Put of a temp-shaped key: %v, want ErrInvalidKey", err)
	}
	// Dot files that are not our temporaries are ordinary keys.
	if err := l.Put(t.Context(), ".hidden.tmp", []byte("h")); err != nil {
		t.Fatalf("Put(.hidden.tmp): %v", err)
	}
}

// TestLocalNoTempLeftovers: after racing put-if-absents, overwrites, and
// created objects committed or aborted, only the objects remain on disk.
func TestLocalNoTempLeftovers(t *testing.T) {
	l := newLocal(t)
	ctx := t.Context()
	for i := range 8 {
		l.PutIfAbsent(ctx, "d/k", []byte{byte(i)})
		if err := l.Put(ctx, "d/p", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		w, err := l.Create(ctx, "d/c")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte{byte(i)})
		if i%2 == 0 {
			w.Abort()
		} else if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(l.Root(), "d"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "c,k,p" {
		t.Fatalf("directory holds %q, want only c, k and p", names)
	}
}

func TestLocalString(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "with space")
	l, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), "file://"+strings.ReplaceAll(dir, " ", "%20"); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if _, err := storage.NewLocal(filepath.Join(dir, "..", "with space")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := storage.NewLocal(file); err == nil {
		t.Fatal("NewLocal on a regular file succeeded")
	}
}

func TestValidateKey(t *testing.T) {
	valid := []string{"a", "a/b", "_delta_log/00000000000000000000.json", ".hidden", "a/.b", "..a", "a b/%20/=/ü", "a..b"}
	invalid := []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a\x00", "\xc3\x28"}
	for _, k := range valid {
		if err := storage.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range invalid {
		if err := storage.ValidateKey(k); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

// leaveLocal is what a local writer killed mid-write leaves: a temporary
// file its Create started and nothing ended.
func leaveLocal(t *testing.T, s storage.Store, key string) {
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial " + key)); err != nil {
		t.Fatal(err)
	}
}

func TestLocalSweep(t *testing.T) {
	storagetest.RunSweep(t, func(t *testing.T) storage.Store { return newLocal(t) }, leaveLocal)
}

// TestSweepThroughWrappers: Faulty and Sub pass SweepTemp on, or say the
// store below cannot sweep.
func TestSweepThroughWrappers(t *testing.T) {
	l := newLocal(t)
	leaveLocal(t, l, "a/x")
	dir := filepath.Join(l.Root(), "a")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("leftover not on disk: %v %v", entries, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(dir, entries[0].Name()), old, old)
	var sw storage.Sweeper = storage.NewFaulty(l)
	if n, err := sw.SweepTemp(t.Context(), "a/", time.Hour); n != 1 || err != nil {
		t.Fatalf("SweepTemp through Faulty = %d, %v; want 1", n, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("directory still holds %v", entries)
	}
	plain := struct{ storage.Store }{l} // hides Local's SweepTemp
	_, err = storage.Sub(plain, "a").(storage.Sweeper).SweepTemp(t.Context(), "", time.Hour)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("SweepTemp over a store that cannot sweep: %v, want errors.ErrUnsupported", err)
	}
	_, err = storage.Sub(l, "../a").(storage.Sweeper).SweepTemp(t.Context(), "", time.Hour)
	if !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("SweepTemp of a Sub with a bad prefix: %v, want ErrInvalidKey", err)
	}
}

// TestLocalRetriedPutIfAbsentSyncsTheDirectory: a put-if-absent whose
// first attempt linked the file and then failed (before its directory
// fsync) is retried with the same bytes; the retry finds them and reports
// success, which it may only do after fsyncing the directory itself.
func TestLocalRetriedPutIfAbsentSyncsTheDirectory(t *testing.T) {
	l := newLocal(t)
	dir := filepath.Join(l.Root(), "t", "_delta_log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the first attempt left: the linked file, no directory fsync.
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.json"), []byte("commit"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := storage.DirSyncs()
	if err := l.PutIfAbsent(t.Context(), "t/_delta_log/00000000000000000001.json", []byte("commit")); err != nil {
		t.Fatalf("retry with the same bytes: %v", err)
	}
	if storage.DirSyncs() == before {
		t.Fatal("the retry reported the commit durable without fsyncing its directory")
	}
}
