// Package keys keeps the keys of personal data: one data key per (data
// subject, topic) in a PostgreSQL table, each wrapped by a root key that
// the key-encryption key (KEK) wraps, and the keyed hash that names
// subjects and pseudonymises keys.
//
// # Layout
//
// deltabus.key_root holds one row: two Tink keysets encrypted by the KEK
// (DELTABUS_KEK: a Tink keyset file or an AWS KMS key): an AES-256-GCM
// keyset that wraps the data keys, and an HMAC-SHA256 PRF keyset for the
// keyed hashes. One KMS call opens it at start; data keys are then
// wrapped and unwrapped locally (Tink's envelope pattern), so a new
// subject costs no KMS call. deltabus.subject_keys holds, per (subject
// hash, topic), the subject's AES-256-GCM data keyset wrapped by the root
// key with the (topic, subject) as associated data. Subject ids are never
// stored: only their keyed hash (16 bytes of the PRF).
//
// # Guarantees
//
//   - A subject's key is created once whatever the number of relays that
//     meet it at once: each inserts its candidate with ON CONFLICT DO
//     NOTHING, then everyone reads the row that won.
//   - A key is durable before it is used: the insert commits (with
//     synchronous_commit on, whatever the server's default) before DataKey
//     returns, so no ciphertext under a key can reach the store before the
//     key is committed.
//   - Erasure (Delete) removes the rows; from then on DataKey without
//     create reports ErrErased, and nothing can decrypt what the key
//     encrypted (but see docs/personal-data.md: backups keep rows until
//     they expire).
//   - The cache is bounded in entries and age (Options); Forget drops a
//     subject's entries at once (consumers call it at an erasure record).
//   - Errors never carry a subject id or key material; each is one line
//     naming the fix (usererr) for a wrong KEK, a missing table or a
//     missing privilege.
package keys
