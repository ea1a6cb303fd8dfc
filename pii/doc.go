// Package pii keeps personal data out of the store in clear: before an
// event is written, each personal leaf of its payload (as its contract
// marks it, package classify) is replaced by an envelope (package
// envelope) encrypted under its data subject's key (package keys); a
// consumer with the KEK and access to the key table turns envelopes back
// into values, and an erased subject's fields into null. Erasure deletes
// the subject's keys (crypto-shredding): every copy of the ciphertext, in
// every data file, compacted file and checkpoint, becomes unreadable at
// once, and the log's history (every event, count and order) stays.
//
// # What a Protector guarantees
//
//   - An event whose contract marks personal data is written with every
//     non-null personal leaf encrypted, or not written as an event at all:
//     a payload whose subject pointer finds nothing (or finds no string or
//     number), a payload that is not JSON, and an event of a version
//     without a schema of a type whose other versions mark personal data
//     become dead letters with their personal leaves (or the whole
//     payload, when the leaves cannot be told) redacted, and a reason that
//     names the pointer, never a value.
//   - A key that cannot be had (key table unreachable, KEK refused) is an
//     error: the caller stops and retries; nothing is written in clear.
//   - Dead letters of topics with personal data (DeadLetter) are redacted
//     the same way, and their raw row is replaced by the redacted fields:
//     redaction, not encryption, so the dead letter of a row is the same
//     bytes whichever path (stream, bootstrap) wrote it.
//   - The rest of the payload is left byte for byte as it was; topic, type,
//     timestamps and positions stay in clear; the key is replaced by a
//     keyed hash on topics that ask for it (Classifier.PseudonymizeKey).
//
// A Protector is safe for concurrent use.
package pii
