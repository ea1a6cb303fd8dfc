// Package storage is the object store the Delta log lives on: a flat space of
// slash-separated keys under one root, with the five operations the Delta
// protocol needs from a log store (put-if-absent, put, get, sorted list,
// delete) and a sixth for data files too large to hold in memory (create:
// write piece by piece, then commit as a put). Two backends implement it, the local filesystem (Local) and
// S3 (S3), and one conformance suite (storage/storagetest) holds both to the
// contract. Open builds either from a URL (file:///abs/path, s3://bucket/prefix);
// Sub scopes a store under a key prefix (one Delta table per topic).
//
// Guarantees every backend gives:
//   - PutIfAbsent is atomic and mutually exclusive: of any number of racing
//     callers on one key writing different bytes, exactly one succeeds and
//     the rest get ErrExists; readers never see a partially written object.
//   - PutIfAbsent is idempotent for identical bytes: it returns nil when the
//     key already holds exactly the bytes given. So a caller that saw an
//     error (timeout, crash, injected fault) may simply call it again with
//     the same bytes: nil means "our bytes are there", ErrExists means
//     "someone else's bytes are there". The S3 backend does this itself for
//     timeouts and 5xx responses before returning.
//   - Put is atomic (all or nothing) and may overwrite; so is the Commit of
//     an object written through Create, which is invisible until then.
//   - A nil return from PutIfAbsent, Put or Delete means the change is durable
//     (local: file and directory fsynced; S3: acknowledged by the service).
//   - List returns keys in lexicographic (byte) order and is strongly
//     consistent with completed puts.
//   - Keys are validated the same way everywhere (see ValidateKey), so a key
//     that works on one backend works on the other.
//
// # Local filesystem
//
// Keys map to files under the root directory. PutIfAbsent writes an
// unnamed file (O_TMPFILE) in the target directory, fsyncs it, names it
// with linkat(2) (which fails with EEXIST instead of overwriting) and
// fsyncs the directory; a directory written often has its next unnamed
// file made ahead of time, so the inode's allocation is off the commit's
// path (local_spare_linux.go). Where O_TMPFILE is missing it writes a
// hidden temporary file (".<name>.<uuid>.tmp"), links it and removes the
// temporary name. It never renames, because rename(2) overwrites. Put
// names the unnamed file (or writes the temporary file) and renames it
// over the target, then fsyncs the directory; Create writes the same
// kind of temporary file as the bytes come and Commit does the rest, so a
// large data file is written once. Missing parent
// directories are created and made durable. Temporary files are never listed;
// ones left behind by a crash are removed by SweepTemp (Sweeper) once old
// enough.
//
// A full disk (ENOSPC, or EDQUOT) on write, fsync, link, create or mkdir
// fails the operation with an error reading "<op> "<key>": store
// file:///root: no space left on device (<call> <path>)" that wraps the
// errno, and leaves neither an object nor a temporary file. A failed Write
// of a created object removes its temporary file at once (freeing the
// space) and makes Commit fail; the same holds for S3's spill file.
//
// # S3
//
// PutIfAbsent is a PutObject with "If-None-Match: *" (supported by AWS S3
// and by S3-compatible servers such as versitygw). HTTP goes through
// go-retryablehttp (connection errors, stalls, 429 and 5xx are retried
// with capped exponential backoff); the SDK's own retryer is disabled so
// retries are not multiplied. Because a retried conditional PUT whose first
// attempt landed gets 412, and a timed-out one may or may not have landed,
// every outcome other than success or a definite client error is resolved
// by reading the key back and comparing bytes; 409
// ConditionalRequestConflict is retried.
//
// Every HTTP attempt re-reads its request body from the source (the byte
// slice given, or the temporary file behind Create): request bodies are
// never copied into memory for retries. An attempt that makes no progress
// for S3Config.HTTPTimeout (30s) fails with a *StallError and is retried,
// so an unresponsive server makes operations fail, never hang. Retries are
// logged through S3Config.Logger, the first at once and then at most one
// line per 10s carrying the count of those not logged.
//
// Create spills the object to an unnamed temporary file (TMPDIR; nothing
// survives the process), computing the MD5 of each 16 MiB part on the way.
// Commit sends an object of up to 16 MiB as one PutObject and a larger one
// as a multipart upload (parts one after the other, each with Content-MD5;
// aborted on failure; a complete whose answer was lost is resolved by
// comparing the object's ETag with the multipart ETag of our parts).
// Memory per upload stays around 1 MiB whatever the object size. Uploads
// left by a writer killed mid-commit (or whose abort failed) are aborted by
// SweepTemp (Sweeper) once old enough.
//
// Fault injection for other packages' tests is in Faulty.
package storage
