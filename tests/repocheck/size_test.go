package repocheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoLargeTrackedFiles fails on any file git tracks (or has staged)
// that is larger than MaxFileSize and not under a testdata/ folder.
func TestNoLargeTrackedFiles(t *testing.T) {
	root := repoRoot(t)
	large, err := largeTrackedFiles(root, MaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range large {
		t.Errorf("%s: tracked file over 1 MiB outside testdata/: remove it (git rm --cached %s) and ignore it in .gitignore, or move a test fixture under testdata/", f, f)
	}
}

// TestLargeFileCheckSeesAStagedFile: the check reads git's index, so a
// large file added by `git add` fails it, and the same file under
// testdata/ does not.
func TestLargeFileCheckSeesAStagedFile(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	big := bytes.Repeat([]byte{'x'}, MaxFileSize+1)
	for _, f := range []string{"materialize", "sink/testdata/fixture.parquet", "small.go"} {
		data := big
		if f == "small.go" {
			data = []byte("package small\n")
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	large, err := largeTrackedFiles(dir, MaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(large, []string{"materialize"}) {
		t.Fatalf("large files = %q, want [materialize]", large)
	}
}

// largeTrackedFiles lists the files in root's git index larger than max,
// except those with a testdata path element. A file deleted from the
// work tree but still in the index is measured by its indexed blob.
func largeTrackedFiles(root string, max int64) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--stage").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	var large []string
	for _, entry := range strings.Split(string(out), "\x00") {
		// <mode> <object> <stage>\t<path>
		meta, path, ok := strings.Cut(entry, "\t")
		if !ok || slices.Contains(strings.Split(path, "/"), "testdata") {
			continue
		}
		size, err := blobSize(root, path, meta)
		if err != nil {
			return nil, err
		}
		if size > max {
			large = append(large, path)
		}
	}
	return large, nil
}

func blobSize(root, path, meta string) (int64, error) {
	if fi, err := os.Lstat(filepath.Join(root, path)); err == nil {
		return fi.Size(), nil
	}
	f := strings.Fields(meta)
	if len(f) < 2 {
		return 0, fmt.Errorf("git ls-files: unexpected entry %q", meta)
	}
	out, err := exec.Command("git", "-C", root, "cat-file", "-s", f[1]).Output()
	if err != nil {
		return 0, fmt.Errorf("git cat-file -s %s (%s): %w", f[1], path, err)
	}
	var n int64
	_, err = fmt.Sscan(string(out), &n)
	return n, err
}

// repoRoot is the top of the git work tree this package is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git work tree (this check reads git's index): %v", err)
	}
	return strings.TrimSpace(string(out))
}
