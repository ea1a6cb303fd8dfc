package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrExists is returned by PutIfAbsent when the key already holds an object
// with different bytes.
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
// start with "/" and never contain empty, "." or ".." segments (ValidateKey);
// an invalid key is rejected with an error wrapping ErrInvalidKey before any
// I/O. All methods are safe for concurrent use and honour ctx: when ctx ends
// they return an error wrapping ctx.Err() (for writes the outcome is then
// unknown, see PutIfAbsent).
type Store interface {
	// PutIfAbsent writes data at key only if no object exists there.
	//
	// It returns nil when the key holds exactly data on return: written by
	// this call, or already there with identical bytes (an earlier attempt of
	// the same write). It returns ErrExists (possibly wrapped) when the key
	// holds different bytes; the existing object is left untouched. Of racing
	// callers writing different bytes, exactly one gets nil. The write is
	// durable when PutIfAbsent returns nil, and readers never see a partial
	// object.
	//
	// An ambiguous outcome (timeout, 5xx, a retried request whose first
	// attempt landed) is resolved by the backend before returning: it reads
	// the key back and compares bytes. Any other error means the outcome is
	// unknown (the bytes may or may not be there); calling PutIfAbsent again
	// with the same bytes resolves it.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Put writes data at key atomically, replacing any existing object. The
	// write is durable when Put returns nil; readers see either the old or
	// the new object, never a mix.
	Put(ctx context.Context, key string, data []byte) error

	// Get returns the whole object at key, or an error wrapping ErrNotFound
	// when the key holds no object (including when the key names a
	// "directory": directories are not objects).
	Get(ctx context.Context, key string) ([]byte, error)

	// List returns every object whose key starts with prefix and sorts
	// strictly after startAfter ("" = from the beginning), in lexicographic
	// byte order of Key. startAfter need not be an existing key. prefix ""
	// lists the whole store; an empty result is an empty slice and nil
	// error. Directories are not objects. Keys are relative to the store
	// root. List is strongly consistent with completed writes.
	List(ctx context.Context, prefix, startAfter string) ([]Object, error)

	// Create starts writing the object at key piece by piece, for an object
	// too large to hold in memory. Nothing is visible at key until the
	// writer's Commit returns nil; Commit then has Put's guarantees (atomic
	// replace, durable, ambiguous on error). Abort discards what was
	// written. Create itself does only local work in both backends.
	Create(ctx context.Context, key string) (ObjectWriter, error)

	// Delete removes the object at key. Deleting a missing key is not an
	// error. The removal is durable when Delete returns nil.
	Delete(ctx context.Context, key string) error

	// String returns the store's URL (file:///path or s3://bucket/prefix)
	// for logs and messages; it never contains credentials.
	String() string
}

// ObjectWriter is an object being written by Store.Create. Write appends;
// exactly one of Commit or Abort ends it (Abort after Commit is a no-op, so
// "defer w.Abort()" is safe). It is not safe for concurrent use.
type ObjectWriter interface {
	io.Writer
	// Commit makes the bytes written so far the object at the key.
	Commit(ctx context.Context) error
	// Abort discards the bytes written, leaving nothing behind.
	Abort()
}
