// Package migrations creates and checks what the relay needs in the source
// database: the outbox table, its (topic, occurred_at) index, its replica
// identity and the publication the relay's slot reads.
//
// The SQL lives in embedded files (sql/*.sql), filled with quoted
// identifiers from Options.
//
// Guarantees:
//
//   - Apply is idempotent. It runs in one transaction under a
//     pg_advisory_xact_lock, so concurrent runs (several relay instances
//     starting at once) serialise, and a second run changes nothing. Either
//     every step is applied or none is.
//   - Apply never drops or rewrites anything: it creates what is missing,
//     sets REPLICA IDENTITY DEFAULT (the primary key) and adds the table to
//     an existing publication, which several outbox tables (one per
//     schema) may share. It refuses, changing nothing, an existing table
//     that lacks a mapped column.
//   - The Report names every object looked at and whether Apply changed
//     it, so "relay migrate" can print exactly what happened.
//   - Check fails when events could be lost or stuck: wal_level is not
//     logical, the publication is missing, publishes no INSERTs or no
//     tables, or includes a table that is not an outbox under its mapping,
//     publishes only some of its mapped columns, or filters its rows. Each
//     error is one line naming the fix.
//
// PostgreSQL 14 or later is required (MinMajor); Apply and Check refuse
// an older server in one line, before changing anything.
package migrations
