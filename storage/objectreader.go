package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// ObjectReader reads parts of one object where asked: a Parquet reader
// takes its footer, then only the column chunks it needs.
type ObjectReader interface {
	io.ReaderAt
	io.Closer
	// Size is the object's length in bytes.
	Size() int64
}

// rangeOpener is a Store that reads parts of an object for the price of
// the bytes read. Local is one: a file read where asked costs no more. S3
// is not: each ranged GET is a round trip of its own, which costs more
// than the bytes a small object saves, so readers there fetch it whole.
type rangeOpener interface {
	openObject(ctx context.Context, key string) (ObjectReader, error)
}

// OpenObject opens the object at key for reads of its parts. It returns an
// error wrapping errors.ErrUnsupported when store reads objects only whole
// (then use Get), and one wrapping ErrNotFound when key holds no object.
// The object read is the one at key when OpenObject returned, even if it
// is replaced meanwhile.
func OpenObject(ctx context.Context, store Store, key string) (ObjectReader, error) {
	if o, ok := store.(rangeOpener); ok {
		return o.openObject(ctx, key)
	}
	return nil, fmt.Errorf("open %q in %s for ranged reads: %w", key, store, errors.ErrUnsupported)
}

func (s *subStore) openObject(ctx context.Context, key string) (ObjectReader, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return OpenObject(ctx, s.inner, k)
}

// localObject is an open file of a Local store.
type localObject struct {
	*os.File
	size int64
}

func (o *localObject) Size() int64 { return o.size }

func (l *Local) openObject(ctx context.Context, key string) (ObjectReader, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("open %q in %s: %w", key, l, ErrNotFound)
		}
		return nil, fmt.Errorf("open %q in %s: %w", key, l, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("open %q in %s: %w", key, l, err)
	case fi.IsDir(): // directories are not objects
		f.Close()
		return nil, fmt.Errorf("open %q in %s: %w", key, l, ErrNotFound)
	}
	return &localObject{File: f, size: fi.Size()}, nil
}
