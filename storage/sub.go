package storage

import (
	"context"
	"fmt"
	"strings"
)

// Sub returns store scoped under prefix: keys given to it are relative to
// prefix, and List returns keys relative to prefix. prefix must be a valid
// key (surrounding "/" are trimmed); an invalid prefix yields a Store whose
// every operation returns the validation error.
func Sub(store Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if err := ValidateKey(prefix); err != nil {
		return errStore{err: fmt.Errorf("sub-store of %s: %w", store, err), name: store.String()}
	}
	return &subStore{inner: store, prefix: prefix}
}

type subStore struct {
	inner  Store
	prefix string
}

func (s *subStore) String() string { return s.inner.String() + "/" + s.prefix }

func (s *subStore) key(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + "/" + key, nil
}

func (s *subStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.PutIfAbsent(ctx, k, data)
}

func (s *subStore) Put(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Put(ctx, k, data)
}

func (s *subStore) Create(ctx context.Context, key string) (ObjectWriter, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Create(ctx, k)
}

func (s *subStore) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, k)
}

func (s *subStore) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Delete(ctx, k)
}

func (s *subStore) List(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	base := s.prefix + "/"
	after := ""
	if startAfter != "" {
		after = base + startAfter
	}
	objs, err := s.inner.List(ctx, base+prefix, after)
	if err != nil {
		return nil, err
	}
	for i := range objs {
		objs[i].Key = strings.TrimPrefix(objs[i].Key, base)
	}
	return objs, nil
}

// errStore fails every operation with err.
type errStore struct {
	err  error
	name string
}

func (e errStore) String() string                                         { return e.name }
func (e errStore) PutIfAbsent(context.Context, string, []byte) error      { return e.err }
func (e errStore) Put(context.Context, string, []byte) error              { return e.err }
func (e errStore) Get(context.Context, string) ([]byte, error)            { return nil, e.err }
func (e errStore) Create(context.Context, string) (ObjectWriter, error)   { return nil, e.err }
func (e errStore) Delete(context.Context, string) error                   { return e.err }
func (e errStore) List(context.Context, string, string) ([]Object, error) { return nil, e.err }
