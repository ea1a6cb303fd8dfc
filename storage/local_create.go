package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Create implements Store: the bytes go to a temporary file next to the
// target (invisible to List and Get), which Commit fsyncs and renames into
// place, so a large object is written once and never read back.
func (l *Local) Create(ctx context.Context, key string) (ObjectWriter, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %q: %w", key, err)
	}
	target := l.path(key)
	dir := filepath.Dir(target)
	if err := l.mkdirs(dir); err != nil {
		return nil, l.opError("create", key, err)
	}
	tmp := filepath.Join(dir, tempName(filepath.Base(target)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, l.opError("create", key, err)
	}
	return &localWriter{l: l, key: key, target: target, f: f}, nil
}

type localWriter struct {
	l       *Local
	key     string
	target  string
	f       *os.File // nil once committed or aborted
	written int64
	synced  int64 // bytes whose writeback has been started
	err     error // the first Write error: the object is incomplete
}

// writebackEvery is how many written bytes start their writeback early, so
// Commit's fsync of a large object does not wait for all of it.
const writebackEvery = 8 << 20

func (w *localWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.f == nil {
		return 0, fmt.Errorf("write %q: object writer already ended", w.key)
	}
	n, err := w.f.Write(p)
	w.written += int64(n)
	if err != nil {
		// The object can no longer be committed: free its space now.
		w.err = w.l.opError("write", w.key, err)
		w.Abort()
		return n, w.err
	}
	if w.written-w.synced >= writebackEvery {
		startWriteback(w.f, w.synced, w.written-w.synced)
		w.synced = w.written
	}
	return n, nil
}

func (w *localWriter) Commit(ctx context.Context) error {
	if w.err != nil {
		return fmt.Errorf("commit %q: nothing committed, an earlier write failed: %w", w.key, w.err)
	}
	if w.f == nil {
		return fmt.Errorf("commit %q: object writer already ended", w.key)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit %q: %w", w.key, err)
	}
	f := w.f
	defer w.Abort()
	if err := f.Sync(); err != nil {
		return w.l.opError("commit", w.key, err)
	}
	if err := f.Close(); err != nil {
		return w.l.opError("commit", w.key, err)
	}
	if err := os.Rename(f.Name(), w.target); err != nil {
		return w.l.opError("commit", w.key, err)
	}
	w.f = nil
	if err := syncDir(filepath.Dir(w.target)); err != nil {
		return w.l.opError("commit", w.key, err)
	}
	return nil
}

func (w *localWriter) Abort() {
	if w.f == nil {
		return
	}
	w.f.Close()
	os.Remove(w.f.Name())
	w.f = nil
}
