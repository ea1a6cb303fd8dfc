package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/google/uuid"
)

const tempSuffix = ".tmp"

// dirSyncs counts directory fsyncs (tests check that a write reported
// durable had one).
var dirSyncs atomic.Int64

// maxNameBytes is the usual NAME_MAX; temporary names are kept under it.
const maxNameBytes = 255

// tempName returns ".<name>.<uuid>.tmp", shortening name if the result
// would exceed NAME_MAX.
func tempName(name string) string {
	id := uuid.NewString()
	room := maxNameBytes - len(id) - len(tempSuffix) - 2
	if len(name) > room {
		name = name[:room]
	}
	return "." + name + "." + id + tempSuffix
}

// isTempName reports whether a file name has the shape tempName produces.
func isTempName(name string) bool {
	if !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, tempSuffix) {
		return false
	}
	rest := strings.TrimSuffix(name, tempSuffix)
	if len(rest) < 36+2 || rest[len(rest)-37] != '.' {
		return false
	}
	return uuid.Validate(rest[len(rest)-36:]) == nil
}

// Put implements Store: temp file + fsync + rename + directory fsync.
func (l *Local) Put(ctx context.Context, key string, data []byte) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	if err := l.put(key, data, false); err != nil {
		return l.opError("put", key, err)
	}
	return nil
}

// PutIfAbsent implements Store: temp file + fsync + link(2) + unlink temp +
// directory fsync. link fails with EEXIST rather than overwrite; then the
// existing bytes are compared with data.
func (l *Local) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put-if-absent %q: %w", key, err)
	}
	err := l.put(key, data, true)
	if errors.Is(err, os.ErrExist) {
		return l.compareExisting(ctx, key, data)
	}
	if err != nil {
		return l.opError("put-if-absent", key, err)
	}
	return nil
}

// compareExisting resolves a lost put-if-absent race: identical bytes are
// ours (an earlier attempt of the same write), different bytes are
// ErrExists. An earlier attempt whose link succeeded may have failed before
// its directory fsync: the directory is fsynced again before the write is
// reported durable.
func (l *Local) compareExisting(ctx context.Context, key string, data []byte) error {
	got, err := l.Get(ctx, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("put-if-absent %q in %s: path exists but is not an object: %w", key, l, ErrExists)
		}
		return fmt.Errorf("put-if-absent %q: compare with existing object: %w", key, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("put-if-absent %q in %s: %w", key, l, ErrExists)
	}
	if err := syncDir(filepath.Dir(l.path(key))); err != nil {
		return l.opError("put-if-absent", key, err)
	}
	return nil
}

// put writes data to a temporary file next to the target and then moves it
// into place: link(2) when exclusive (os.ErrExist if taken), else rename(2).
func (l *Local) put(key string, data []byte, exclusive bool) error {
	target := l.path(key)
	dir := filepath.Dir(target)
	if err := l.mkdirs(dir); err != nil {
		return err
	}
	if f, err := l.spares.take(dir); err != nil {
		return err
	} else if f != nil {
		err := putUnnamed(f, dir, target, data, exclusive)
		if err == nil || errors.Is(err, os.ErrExist) {
			return err
		}
		// A spare made in a directory since replaced, or a failed write:
		// one more try the named way, which reports the error plainly.
	}
	tmp := filepath.Join(dir, tempName(filepath.Base(target)))
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	var err error
	if exclusive {
		err = os.Link(tmp, target)
		if rmErr := os.Remove(tmp); err == nil && rmErr != nil {
			err = fmt.Errorf("remove temporary file: %w", rmErr)
		}
	} else {
		err = os.Rename(tmp, target)
		if err != nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// putUnnamed writes data to the unnamed file f, fsyncs it and names it
// target: linkat(2) when exclusive (os.ErrExist if taken), else linkat to a
// temporary name and rename(2) over target. It closes f.
func putUnnamed(f *os.File, dir, target string, data []byte, exclusive bool) error {
	defer f.Close()
	if err := writeAll(f, data); err != nil {
		return err
	}
	if exclusive {
		if err := linkUnnamed(f, target); err != nil {
			return err
		}
		return syncDir(dir)
	}
	tmp := filepath.Join(dir, tempName(filepath.Base(target)))
	if err := linkUnnamed(f, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeAll writes data to f and fsyncs it.
func writeAll(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// writeSynced creates path exclusively, writes data and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mkdirs creates dir and its missing parents below the root, fsyncing each
// parent whose entries changed so the new directories survive a crash.
func (l *Local) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(l.root, dir)
	if err != nil || rel == "." {
		return err
	}
	cur := l.root
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, seg)
		err := os.Mkdir(cur, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := syncDir(parent); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs a directory so entries created or removed in it are durable.
func syncDir(dir string) error {
	dirSyncs.Add(1)
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil // filesystems that cannot fsync directories
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
