package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// testOpenObject: a store that reads objects in parts (OpenObject) reads
// the bytes Get returns, at any offset, reports the size, keeps reading
// the object it opened when the key is overwritten, and answers a missing
// key or a "directory" with ErrNotFound; one that cannot says
// ErrUnsupported. The same through a sub-store.
func testOpenObject(t *testing.T, s storage.Store) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	mustPut(t, s, "ranged/a/obj", data)
	for _, c := range []struct {
		st  storage.Store
		key string
	}{{s, "ranged/a/obj"}, {storage.Sub(s, "ranged"), "a/obj"}} {
		r, err := storage.OpenObject(ctx, c.st, c.key)
		if errors.Is(err, errors.ErrUnsupported) {
			continue
		}
		if err != nil {
			t.Fatalf("OpenObject(%q): %v", c.key, err)
		}
		if r.Size() != int64(len(data)) {
			t.Errorf("Size() = %d, want %d", r.Size(), len(data))
		}
		mustPut(t, s, "ranged/a/obj", []byte("replaced")) // Put replaces atomically: the open object stays
		for _, off := range []int{0, 1, 4095, len(data) - 7} {
			buf := make([]byte, 7)
			if n, err := r.ReadAt(buf, int64(off)); n != 7 || err != nil {
				t.Fatalf("ReadAt(%d) = %d, %v", off, n, err)
			}
			if !bytes.Equal(buf, data[off:off+7]) {
				t.Errorf("ReadAt(%d) = %q, want %q", off, buf, data[off:off+7])
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		mustPut(t, s, "ranged/a/obj", data)
	}
	for _, key := range []string{"ranged/missing", "ranged/a"} {
		r, err := storage.OpenObject(ctx, s, key)
		if errors.Is(err, errors.ErrUnsupported) {
			return
		}
		if !errors.Is(err, storage.ErrNotFound) {
			if r != nil {
				r.Close()
			}
			t.Errorf("OpenObject(%q) = %v, want ErrNotFound", key, err)
		}
	}
}
