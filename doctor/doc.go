// Package doctor checks, in one go, every precondition `relay run` needs
// on a user's own database and store, and says for each what is wrong and
// how to fix it (`relay doctor`).
//
// Guarantees:
//
//   - Every check runs, whatever the others found: one misconfiguration
//     does not hide the next. A check that cannot run without another
//     (everything in the database without a connection) is reported as
//     skipped, naming the check it waits for; a report with a skipped
//     check always has a failed one.
//   - The checks are the relay's own where the relay has them: wal_level
//     through pgsource.CheckWALLevel, the publication and the outbox
//     through migrations.CheckPublication (the relay's preflight, less its
//     wal_level check), the slot through pgsource.ReadSlot and
//     Slot.CheckUsable, the store through catalog.CheckWritable. What
//     doctor accepts, the relay's preflight accepts.
//   - Doctor changes nothing the relay or a consumer reads: it creates no
//     slot and no table. In the store it writes probes under
//     _deltabus/probes/ and deletes them. On the database it opens a
//     replication connection (one WAL sender, for a moment) and reads the
//     catalog.
//   - It never hangs: each check has its own timeout (Options.Timeout).
//   - No output holds a password: DSNs are described as user@host/db, and
//     server messages go through pgsource.Redact.
//
// Decisions:
//
//   - max_slot_wal_keep_size = -1, PostgreSQL's default, fails: it is the
//     setting under which a stopped relay fills the database's disk, the
//     failure platform teams fear most. With a limit, PostgreSQL
//     invalidates the slot instead, and the relay refuses to start naming
//     `relay bootstrap --recover`: a recoverable stop, not an outage of
//     the database.
//   - The conditional-write probe writes different bytes the second time:
//     PutIfAbsent of identical bytes succeeds by contract (it resolves a
//     retried write), so only different bytes show whether the server
//     honours If-None-Match.
//   - Clock skew fails above 1 s (--max-clock-skew), less the round
//     trip's uncertainty: NTP keeps hosts within milliseconds, and a
//     second is already visible in latency figures and --from-time resets.
//   - The relay role's SELECT on the outbox is reported by the publication
//     check (it is part of the relay's preflight there), not again by the
//     privileges check.
//
// Topic groups (relay groups): when the store has any, every group's
// definition must read (the relay places new topics by them), and each
// group table that registered topics live in must be there with the table
// id they were written to; otherwise the relay holds those topics until
// `relay rebuild`, and the check names them. Without groups it is not
// listed.
//
// Personal data (package pii): with --pii-schemas, the schemas must
// parse; when they mark personal data, the KEK must encrypt and decrypt a
// probe (a KMS key that exists, credentials with kms:Encrypt and
// kms:Decrypt), and the key table must exist, grant the relay's role
// SELECT and INSERT on both its tables, and hold a root key the KEK opens
// (or none yet: the relay creates it). Doctor creates neither the root nor
// a data key. Without --pii-schemas these checks are not listed.
package doctor
