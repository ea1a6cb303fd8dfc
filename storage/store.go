// Package storage is the object store the Delta log lives on: a flat space of
// slash-separated keys under one root, with exactly the five operations the
// Delta protocol needs from a log store (put-if-absent, put, get, sorted
// list, delete). Two backends implement it, the local filesystem and S3, and
// one conformance suite (storage/storagetest) holds both to the contract.
//
// Guarantees every backend gives:
//   - PutIfAbsent is atomic and mutually exclusive: of any number of racing
//     callers on one key, exactly one succeeds and the rest get ErrExists;
//     readers never see a partially written object.
//   - Put is atomic (all or nothing) and may overwrite.
//   - List returns keys in lexicographic (byte) order and is strongly
//     consistent with completed puts.
package storage

import (
	"context"
	"errors"
	"time"
)

// ErrExists is returned by PutIfAbsent when the key already holds an object.
var ErrExists = errors.New("object already exists")

// ErrNotFound is returned by Get when the key holds no object.
var ErrNotFound = errors.New("object not found")

// Object describes one stored object as returned by List.
type Object struct {
	Key     string    // full key relative to the store root, e.g. "orders/_delta_log/00000000000000000000.json"
	Size    int64     // bytes
	ModTime time.Time // last modification time as the backend reports it
}

// Store is the storage contract. Keys are relative, slash-separated, never
// start with "/" and never contain "." or ".." segments.
type Store interface {
	// PutIfAbsent writes data at key only if no object exists there.
	// It returns ErrExists (possibly wrapped) when one does. The write is
	// durable when PutIfAbsent returns nil. An ambiguous outcome (timeout,
	// 5xx) is resolved by the backend before returning: it reads the key back
	// and compares bytes, so nil means "our bytes are there" and ErrExists
	// means "someone else's bytes are there".
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Put writes data at key atomically, replacing any existing object. The
	// write is durable when Put returns nil.
	Put(ctx context.Context, key string, data []byte) error

	// Get returns the whole object at key, or ErrNotFound (possibly wrapped).
	Get(ctx context.Context, key string) ([]byte, error)

	// List returns every object whose key starts with prefix and sorts
	// strictly after startAfter ("" = from the beginning), in lexicographic
	// key order. Directories are not objects.
	List(ctx context.Context, prefix, startAfter string) ([]Object, error)

	// Delete removes the object at key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error

	// String returns the store's URL (file:///path or s3://bucket/prefix)
	// for logs and messages; it never contains credentials.
	String() string
}
