package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/storage"
)

// dirStore is a small local-filesystem storage.Store for this package's
// tests (storage.NewLocal is written by another engineer). PutIfAbsent uses
// link(2), which fails with EEXIST, so it is exclusive across goroutines and
// processes and never exposes a partial file.
type dirStore struct {
	root  string
	sync  bool         // fsync files (off for bulk benchmark setup)
	gets  atomic.Int64 // Get calls, for "load does not grow with age" tests
	lists atomic.Int64
}

func newDirStore(t testing.TB, root string) *dirStore {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	return &dirStore{root: root, sync: true}
}

func (s *dirStore) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

func (s *dirStore) writeTemp(key string, data []byte) (string, error) {
	dst := s.path(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+"."+uuid.NewString()+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (s *dirStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	tmp, err := s.writeTemp(key, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, s.path(key)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if old, rerr := os.ReadFile(s.path(key)); rerr == nil && bytes.Equal(old, data) {
				return nil
			}
			return fmt.Errorf("put %s: %w", key, storage.ErrExists)
		}
		return err
	}
	return nil
}

func (s *dirStore) Put(ctx context.Context, key string, data []byte) error {
	tmp, err := s.writeTemp(key, data)
	if err != nil {
		return err
	}
	return os.Rename(tmp, s.path(key))
}

func (s *dirStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	b, err := os.ReadFile(s.path(key))
	if errors.Is(err, fs.ErrNotExist) || (err != nil && strings.Contains(err.Error(), "is a directory")) {
		return nil, fmt.Errorf("get %s: %w", key, storage.ErrNotFound)
	}
	return b, err
}

func (s *dirStore) List(ctx context.Context, prefix, startAfter string) ([]storage.Object, error) {
	s.lists.Add(1)
	var out []storage.Object
	base := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = s.path(prefix[:i])
	}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			return nil
		}
		// Another writer's temporary file is not an object, and may vanish
		// while the directory is walked.
		if name := d.Name(); strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
			return nil
		}
		if !strings.HasPrefix(key, prefix) || key <= startAfter {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, storage.Object{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, err
}

func (s *dirStore) Delete(ctx context.Context, key string) error {
	err := os.Remove(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (s *dirStore) String() string { return "file://" + s.root }

// Create buffers the object and puts it on Commit.
func (s *dirStore) Create(ctx context.Context, key string) (storage.ObjectWriter, error) {
	return &bufferedWriter{put: func(ctx context.Context, data []byte) error { return s.Put(ctx, key, data) }}, nil
}

type bufferedWriter struct {
	bytes.Buffer
	put func(context.Context, []byte) error
}

func (w *bufferedWriter) Commit(ctx context.Context) error { return w.put(ctx, w.Bytes()) }
func (w *bufferedWriter) Abort()                           { w.Reset() }
