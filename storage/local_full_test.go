package storage_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs with the given options (size=, nr_inodes=) on a
// fresh directory for the test and unmounts it at the end. It needs root
// and fails, never skips, without it: the CI machine runs tests as root.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("this test mounts a small tmpfs to fill the disk and must run as root (running as uid %d): run the tests as root, as CI does", uid)
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount -t tmpfs -o %s on %s: %v (the test needs CAP_SYS_ADMIN)", opts, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// tmpfsLocal is a Local store on a fresh tmpfs mounted with opts.
func tmpfsLocal(t *testing.T, opts string) (*storage.Local, string) {
	t.Helper()
	root := mountTmpfs(t, opts)
	l, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // its spare files, before the unmount
	return l, root
}

// filesUnder lists every file and directory below root, relative.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantNoSpace checks that err says the store is full, in words and errno.
func wantNoSpace(t *testing.T, what string, err error, l *storage.Local) {
	t.Helper()
	want := "store " + l.String() + ": no space left on device"
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s on a full disk: %v, want ENOSPC saying %q", what, err, want)
	}
}

// TestLocalDiskFull: writes that do not fit fail saying the disk is full,
// leave neither an object nor a temporary file, and free their space.
func TestLocalDiskFull(t *testing.T) {
	l, root := tmpfsLocal(t, "size=1m")
	ctx := t.Context()
	if err := l.Put(ctx, "keep", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 2<<20)
	wantNoSpace(t, "Put", l.Put(ctx, "d/put", big), l)
	wantNoSpace(t, "PutIfAbsent", l.PutIfAbsent(ctx, "d/pia", big), l)

	w, err := l.Create(ctx, "d/created")
	if err != nil {
		t.Fatal(err)
	}
	chunk := big[:64<<10]
	for err == nil {
		_, err = w.Write(chunk)
	}
	wantNoSpace(t, "Write", err, l)
	if _, err := w.Write(chunk); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write after a failed Write: %v, want the same error", err)
	}
	if err := w.Commit(ctx); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Commit after a failed Write: %v, want the write's error", err)
	}
	w.Abort()

	if got := filesUnder(t, root); !slices.Equal(got, []string{"d", "keep"}) {
		t.Fatalf("after failed writes the disk holds %q, want only keep (and the directory d)", got)
	}
	for _, k := range []string{"d/put", "d/pia", "d/created"} {
		if _, err := l.Get(ctx, k); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get(%q) after a failed write: %v, want ErrNotFound", k, err)
		}
	}
	// Nothing was kept: three quarters of the disk still take a put.
	if err := l.Put(ctx, "d/fits", big[:768<<10]); err != nil {
		t.Fatalf("Put after the failed writes: %v", err)
	}
}

// TestLocalNoInodes: with no inode left for the link (PutIfAbsent), the
// temporary file (Create) or a directory, the error says the disk is full
// and nothing is left behind. Named temporary files, as on a file system
// without O_TMPFILE (TestLocalNoInodesUnnamed covers the unnamed ones).
func TestLocalNoInodes(t *testing.T) {
	// 4 inodes: the root directory, two objects, and one free.
	l, root := tmpfsLocal(t, "size=1m,nr_inodes=4")
	storage.WithoutSpares(l)
	ctx := t.Context()
	for _, k := range []string{"a", "b"} {
		if err := l.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// The temporary file takes the last inode, the hard link finds none.
	wantNoSpace(t, "PutIfAbsent", l.PutIfAbsent(ctx, "c", []byte("c")), l)
	if got := filesUnder(t, root); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a failed PutIfAbsent the disk holds %q, want a and b", got)
	}
	if err := l.Put(ctx, "c", []byte("c")); err != nil { // rename needs no inode
		t.Fatal(err)
	}
	_, err := l.Create(ctx, "d")
	wantNoSpace(t, "Create", err, l)
	wantNoSpace(t, "Put in a new directory", l.Put(ctx, "dir/x", []byte("x")), l)
	if got := filesUnder(t, root); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after failed writes the disk holds %q, want a, b and c", got)
	}
	// PutIfAbsent needs two inodes: the temporary file and the link.
	for _, k := range []string{"a", "b"} {
		if err := l.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.PutIfAbsent(ctx, "a", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after freeing two inodes: %v", err)
	}
}

// TestLocalNoInodesUnnamed: a put through an unnamed file (O_TMPFILE) needs
// one inode, its directory's next spare never takes the one a put needs,
// and with none left the put fails saying the disk is full, leaving
// nothing behind.
func TestLocalNoInodesUnnamed(t *testing.T) {
	// 3 inodes: the root directory and two objects.
	l, root := tmpfsLocal(t, "size=1m,nr_inodes=3")
	ctx := t.Context()
	for _, k := range []string{"a", "b"} { // b's put also asks for a spare, which finds no inode
		if err := l.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatalf("PutIfAbsent(%q): %v", k, err)
		}
		storage.WaitSpares(l)
	}
	wantNoSpace(t, "PutIfAbsent", l.PutIfAbsent(ctx, "c", []byte("c")), l)
	wantNoSpace(t, "Put", l.Put(ctx, "c", []byte("c")), l)
	if got := filesUnder(t, root); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after failed puts the disk holds %q, want a and b", got)
	}
	if err := l.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := l.PutIfAbsent(ctx, "c", []byte("c")); err != nil {
		t.Fatalf("PutIfAbsent after freeing an inode: %v", err)
	}
	storage.WaitSpares(l)
	if got := filesUnder(t, root); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("the disk holds %q, want b and c", got)
	}
}

// TestS3SpillDiskFull: an S3 object whose temporary file does not fit in
// TMPDIR fails at Write, and Commit then uploads nothing.
func TestS3SpillDiskFull(t *testing.T) {
	cfg := s3test.NewBucket(t).S3Config("p") // the server's files stay out of TMPDIR
	tmp := mountTmpfs(t, "size=1m")
	t.Setenv("TMPDIR", tmp)
	ft := &faultTransport{}
	cfg.Transport = ft
	s := newS3(t, cfg)
	w, err := s.Create(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	for err == nil {
		_, err = w.Write(chunk)
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), tmp) {
		t.Fatalf("Write with TMPDIR full: %v, want ENOSPC naming %s", err, tmp)
	}
	if err := w.Commit(t.Context()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Commit after a failed Write: %v, want the write's error", err)
	}
	ft.want(t) // nothing sent
	if got := filesUnder(t, tmp); len(got) != 0 {
		t.Fatalf("TMPDIR holds %q after the failed object", got)
	}
}
