// Package txlog keeps the bus's transaction records: for each source
// transaction that published events, one row in the Delta table
// _transactions under the store root (change feed on, readable with
// `relay tail`), naming the source, the transaction (xid, commit LSN, end
// LSN, commit time) and how many of its events each table holds
// (`topics`, a JSON object: topic name to count; rows the relay sent to
// _dead_letter are counted under "_dead_letter").
//
// Guarantees (the argument is in package catalog, "Transaction records and
// resolved positions"):
//
//   - A record is committed only after every topic commit holding its
//     events: a record seen means all its events are readable, in the
//     tables its topics name.
//   - Exactly one record per transaction, across crashes: a commit of
//     records carries the txn action {appId, version = commit LSN of its
//     last transaction}, as a topic commit does, and a relay skips, on
//     replay, the transactions at or below that version.
//   - In commit order per source: records of one source are committed in
//     the order of their transactions.
//
// Transactions whose events a bootstrap or a rebuild copied from a snapshot
// have no record: a snapshot has no transactions.
package txlog
