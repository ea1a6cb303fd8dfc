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
// key with the (topic, subject) as associated data.
// deltabus.erased_subjects holds, per subject hash and topic (the empty
// topic: every topic), the time of the subject's latest erasure. Subject ids are never
// stored: only their keyed hash (16 bytes of the PRF).
//
// # Guarantees
//
//   - A subject's key is created once whatever the number of relays that
//     meet it at once: each inserts its candidate with ON CONFLICT DO
//     NOTHING, then everyone reads the row that won.
//   - A key is durable before it is used: the insert commits (with
//     synchronous_commit on, whatever the server's default) before SealKey
//     returns, so no ciphertext under a key can reach the store before the
//     key is committed, on the synchronous standbys too when the server
//     names any (synchronous_standby_names). An asynchronous standby can
//     lack it: a failover to one loses the keys it lacked, and the fields
//     they encrypted become unreadable for good (docs/personal-data.md
//     says what the key table's database needs).
//   - Erasure (Delete) records the erasure in deltabus.erased_subjects and
//     removes the keys, in one transaction under the subject's advisory
//     lock; from then on DataKey reports ErrErased, nothing can decrypt
//     what the keys encrypted (but see docs/personal-data.md: backups keep
//     rows until they expire), and SealKey creates no key for a value
//     written before the erasure, whichever process asks and however late
//     (key creation takes the same lock, so an erasure and a creation at
//     once are ordered). A value written after it gets a new key, which
//     no earlier value may use.
//   - The cache is bounded in entries and age (Options); Forget drops a
//     subject's entries at once (consumers call it at an erasure record).
//   - Errors never carry a subject id or key material; each is one line
//     naming the fix (usererr) for a wrong KEK, a missing table or a
//     missing privilege.
package keys
