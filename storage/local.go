package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/deltabus/deltabus/coop"
)

// Local is a Store on a local filesystem directory. See the package
// documentation for how writes are made atomic and durable.
type Local struct {
	root   string    // absolute, cleaned, OS separators
	spares *spareSet // nil: named temporary files only
}

var _ Store = (*Local)(nil)

// NewLocal returns a Store rooted at the directory root, creating it (and
// missing parents) if needed. root may be relative; it is made absolute.
func NewLocal(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local store %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("local store %q: %w", abs, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("local store %q: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local store %q: not a directory", abs)
	}
	return &Local{root: abs, spares: newSpareSet()}, nil
}

// Close releases the unnamed spare files the store keeps open for its
// next puts (local_spare_linux.go). The store stays usable; a process
// that exits needs no Close.
func (l *Local) Close() error {
	l.spares.close()
	return nil
}

// Root returns the absolute root directory.
func (l *Local) Root() string { return l.root }

// String returns file:///root.
func (l *Local) String() string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(l.root)}
	return u.String()
}

func (l *Local) path(key string) string {
	return filepath.Join(l.root, filepath.FromSlash(key))
}

// checkKey validates key for the local backend: ValidateKey plus no segment
// that looks like one of our temporary files (List would hide it).
func (l *Local) checkKey(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	_, name := splitDir(key)
	if isTempName(name) {
		return fmt.Errorf("%w %q: name is reserved for temporary files", ErrInvalidKey, key)
	}
	return nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	data, err := os.ReadFile(l.path(key))
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("get %q from %s: %w", key, l, ErrNotFound)
		}
		return nil, fmt.Errorf("get %q from %s: %w", key, l, err)
	}
	return data, nil
}

// isNotFound reports errors meaning "no object at this path": missing file,
// a parent that is a file, or a directory where the object would be.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.EISDIR)
}

// Delete implements Store.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	p := l.path(key)
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return nil // directories are not objects
	}
	if err := os.Remove(p); err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete %q from %s: %w", key, l, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete %q from %s: %w", key, l, err)
	}
	return nil
}

// List implements Store. It walks the deepest directory the prefix names,
// collects regular files (skipping our temporary files) and sorts by key.
func (l *Local) List(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	dir, _ := splitDir(prefix)
	var out []Object
	keep := func(key string) bool { return strings.HasPrefix(key, prefix) && key > startAfter }
	err := l.walk(ctx, dir, false, keep, func(key string, fi fs.FileInfo) {
		out = append(out, Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
	})
	if err != nil {
		return nil, fmt.Errorf("list %q after %q in %s: %w", prefix, startAfter, l, err)
	}
	slices.SortFunc(out, compareObjects)
	if out == nil {
		out = []Object{}
	}
	return out, nil
}

// walk calls fn for every regular file under the directory dirKey ("" =
// root) whose key passes keep: the objects, or with temp the temporary
// files instead, in the directory's own order (List sorts what it keeps).
// keep is checked before the file is stat'ed (a log listed from a
// checkpoint on costs no stat per older commit). The directory is read
// walkBatch entries at a time, yielding between batches: the log of a busy
// table holds tens of thousands of commits, and a background checkpoint
// lists it beside the commits on one P (package coop). A missing directory
// yields nothing.
func (l *Local) walk(ctx context.Context, dirKey string, temp bool, keep func(string) bool, fn func(key string, fi fs.FileInfo)) error {
	d, err := os.Open(l.path(dirKey))
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	defer d.Close()
	var y coop.Yielder
	for {
		entries, err := d.ReadDir(walkBatch)
		for _, e := range entries {
			if err := l.visit(ctx, dirKey, e, temp, keep, fn); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF), err != nil && isNotFound(err):
			return nil // a file, not a directory, or gone: nothing below it
		case err != nil:
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		y.Yield()
	}
}

// walkBatch is how many directory entries walk reads between two yields.
const walkBatch = 512

// visit is walk's step for one directory entry.
func (l *Local) visit(ctx context.Context, dirKey string, e fs.DirEntry, temp bool, keep func(string) bool, fn func(key string, fi fs.FileInfo)) error {
	key := joinKey(dirKey, e.Name())
	switch {
	case e.IsDir():
		return l.walk(ctx, key, temp, keep, fn)
	case e.Type().IsRegular() && isTempName(e.Name()) == temp && keep(key):
		fi, err := e.Info()
		if isNotFound(err) {
			return nil // deleted while listing
		}
		if err != nil {
			return err
		}
		fn(key, fi)
	}
	return nil
}
