package storage

import (
	"context"
	"crypto/md5"
	"fmt"
	"hash"
	"math"
	"os"
)

// Create implements Store: the bytes go to an unnamed temporary file in the
// system's temporary directory (its name is removed at once, so a killed
// writer leaves nothing there), with the MD5 of every part computed on the
// way. Commit sends an object of at most one part as one PutObject and a
// larger one as a multipart upload (s3_multipart.go); either way every HTTP
// attempt reads the file again, so memory stays small whatever the size.
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
	os.Remove(f.Name()) // the open file lives on until Close
	partSize := s.partSize
	if bufferedUploads.Load() {
		partSize = math.MaxInt64 // the old path: one PutObject
	}
	return &s3Writer{s: s, key: key, f: f, partSize: partSize, cur: md5.New()}, nil
}

type s3Writer struct {
	s        *S3
	key      string
	f        *os.File // nil once committed or aborted
	partSize int64
	sums     [][md5.Size]byte // MD5 of each complete part
	cur      hash.Hash        // MD5 of the part being written
	n        int64
	err      error // the first Write error: the object is incomplete
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.f == nil {
		return 0, fmt.Errorf("write %q: object writer already ended", w.key)
	}
	n, err := w.f.Write(p)
	w.hash(p[:n])
	if err != nil {
		// The object can no longer be committed: free its space now.
		w.err = fmt.Errorf("write %q for %s: temporary file in %s: %w", w.key, w.s, os.TempDir(), err)
		w.Abort()
		return n, w.err
	}
	return n, nil
}

// hash adds p to the part MD5s, closing a part at every partSize bytes.
func (w *s3Writer) hash(p []byte) {
	for len(p) > 0 {
		k := min(int64(len(p)), w.partSize-w.n%w.partSize)
		w.cur.Write(p[:k])
		w.n += k
		p = p[k:]
		if w.n%w.partSize == 0 {
			w.sums = append(w.sums, [md5.Size]byte(w.cur.Sum(nil)))
			w.cur.Reset()
		}
	}
}

// partSums returns the MD5 of every part, the last possibly short (and the
// only one, empty, for an empty object).
func (w *s3Writer) partSums() [][md5.Size]byte {
	if w.n%w.partSize != 0 || w.n == 0 {
		return append(w.sums, [md5.Size]byte(w.cur.Sum(nil)))
	}
	return w.sums
}

func (w *s3Writer) Commit(ctx context.Context) error {
	if w.err != nil {
		return fmt.Errorf("commit %q: nothing uploaded, an earlier write failed: %w", w.key, w.err)
	}
	if w.f == nil {
		return fmt.Errorf("commit %q: object writer already ended", w.key)
	}
	defer w.Abort()
	sums := w.partSums()
	var err error
	if len(sums) == 1 {
		err = w.s.putBody(ctx, w.key, payload{src: w.f, size: w.n, md5: sums[0]}, false)
	} else {
		err = w.s.putMultipart(ctx, w.key, w.f, w.n, w.partSize, sums)
	}
	if err != nil {
		return fmt.Errorf("put %q in %s: %w", w.key, w.s, err)
	}
	return nil
}

func (w *s3Writer) Abort() {
	if w.f == nil {
		return
	}
	w.f.Close()
	w.f = nil
}
