package topic

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/storage"
)

// spillBuffer is the sink of one parquet file being written: it keeps the
// first memLimit bytes in memory and, once the file grows past that, moves
// them to an object being created in the store (storage.Store.Create: a
// temporary file beside the target on local disk, a temporary file sent
// as one PUT on S3), so a large file costs disk, not RAM, and is written
// once. It deliberately has no Close method: a parquet writer that closes
// sinks having one must not end it.
type spillBuffer struct {
	store    storage.Store
	key      string
	memLimit int64
	mem      []byte
	w        storage.ObjectWriter // nil until spilled
	n        int64
}

func (s *spillBuffer) Write(p []byte) (int, error) {
	if s.w == nil && s.n+int64(len(p)) > s.memLimit {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	if s.w == nil {
		s.mem = append(s.mem, p...)
		s.n += int64(len(p))
		return len(p), nil
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	return n, err
}

// spill starts the object and moves the buffered bytes to it. Create does
// only local work (see storage.Store.Create), and the parquet writer that
// calls Write has no context to give.
func (s *spillBuffer) spill() error {
	if s.w != nil {
		return nil
	}
	w, err := s.store.Create(context.Background(), s.key)
	if err != nil {
		return fmt.Errorf("spill data file: %w", err)
	}
	if _, err := w.Write(s.mem); err != nil {
		w.Abort()
		return err
	}
	s.w, s.mem = w, nil
	return nil
}

// InMemory is the number of bytes held in memory (0 once spilled).
func (s *spillBuffer) InMemory() int64 {
	if s.w != nil {
		return 0
	}
	return int64(len(s.mem))
}

// Len is the number of bytes written so far.
func (s *spillBuffer) Len() int64 { return s.n }

// upload stores the whole content at the key: a Put of the buffered bytes,
// or the Commit of the spilled object.
func (s *spillBuffer) upload(ctx context.Context) error {
	if s.w == nil {
		return s.store.Put(ctx, s.key, s.mem)
	}
	return s.w.Commit(ctx)
}

// Discard frees the memory and abandons the spilled object, if any.
func (s *spillBuffer) Discard() {
	s.mem = nil
	if s.w != nil {
		s.w.Abort()
		s.w = nil
	}
}
