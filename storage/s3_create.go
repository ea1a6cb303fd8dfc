package storage

import (
	"context"
	"crypto/md5"
	"fmt"
	"hash"
	"io"
	"os"
)

// Create implements Store: the bytes go to a temporary file in the system's
// temporary directory (with their MD5 computed on the way), which Commit
// sends as one PutObject and removes. Memory stays small whatever the size.
func (s *S3) Create(ctx context.Context, key string) (ObjectWriter, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %q: %w", key, err)
	}
	f, err := os.CreateTemp("", "deltabus-s3-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create %q in %s: temporary file: %w", key, s, err)
	}
	return &s3Writer{s: s, key: key, f: f, sum: md5.New()}, nil
}

type s3Writer struct {
	s   *S3
	key string
	f   *os.File // nil once committed or aborted
	sum hash.Hash
	n   int64
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.f == nil {
		return 0, fmt.Errorf("write %q: object writer already ended", w.key)
	}
	n, err := w.f.Write(p)
	w.sum.Write(p[:n])
	w.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %q to %s: %w", w.key, w.f.Name(), err)
	}
	return n, nil
}

func (w *s3Writer) Commit(ctx context.Context) error {
	if w.f == nil {
		return fmt.Errorf("commit %q: object writer already ended", w.key)
	}
	defer w.Abort()
	var sum [md5.Size]byte
	w.sum.Sum(sum[:0])
	body := io.NewSectionReader(w.f, 0, w.n)
	if err := w.s.putBody(ctx, w.key, body, w.n, sum, false); err != nil {
		return fmt.Errorf("put %q in %s: %w", w.key, w.s, err)
	}
	return nil
}

func (w *s3Writer) Abort() {
	if w.f == nil {
		return
	}
	w.f.Close()
	os.Remove(w.f.Name())
	w.f = nil
}
