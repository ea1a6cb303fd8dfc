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
//   - What is encrypted is exactly what the contract's classification
//     calls personal (classify.Classification.Covers): every value at a
//     path a personal mark covers, whether the schema reaches it by name,
//     by a wildcard (patternProperties, additionalProperties, items) or
//     both at once, and nothing else. The scanner walks the payload with
//     every path pattern that matches where it is, never the first one
//     alone; FuzzScanAgreesWithCovers checks the two readings agree on
//     generated schemas and payloads. Dead-letter redaction uses the
//     same scanner.
//   - The rest of the payload is left byte for byte as it was; topic, type,
//     timestamps and positions stay in clear; the key is replaced by a
//     keyed hash on topics that ask for it (Classifier.PseudonymizeKey).
//
// A Protector is safe for concurrent use.
//
// # What a Revealer guarantees
//
//   - It decrypts only where the contract the event was written with (its
//     type and schema version, before any upcasting) marks personal data:
//     the places the relay encrypted. An envelope-shaped object anywhere
//     else is the producer's data and is delivered as written.
//   - An envelope at a personal place that does not open (altered in the
//     store, or copied from another event or field) is that field's
//     outcome: it reads as null, its pointer is listed as unreadable
//     (Revealed.Unreadable, subscribe's Event.Unreadable, relay consume's
//     "unreadable"), counted (Revealer.Unreadable,
//     deltabus_pii_unreadable_fields_total), and the event is delivered.
//     No payload a producer can write makes Reveal fail: only a key table
//     or a contract registry out of reach does, and a retry then succeeds.
package pii
