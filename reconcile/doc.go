// Package reconcile checks that the Delta topic tables are a complete
// account of the source outbox: per topic and closed time window (by the
// outbox occurred_at), it compares the source's rows with the log's events
// and says exactly what differs. It also holds the outbox retention janitor,
// whose horizon bounds what can be checked.
//
// # What a check guarantees
//
// For every (topic, window) it reports one of: clean, diverged,
// unreadable, error, or skipped (open, or beyond retention). For a
// diverged window the report lists the exact event ids that are missing
// from the log, present in the log but not in the source (unexpected), and
// present more than once in the log (duplicates). Ids in the log whose row
// the janitor may have deleted (occurred_at older than the retention
// horizon) are counted as cleaned, not as unexpected.
//
// A data file referenced by an active add of a topic's log but missing from
// storage (or shorter than the add says) makes every window its statistics
// overlap unreadable: the reconciler never counts an absent file as zero
// events.
//
// # Topics that share a group's table
//
// A topic of a topic group (catalog.Group) is checked exactly as a topic
// with its own table, against its own rows only: its log is the group
// table's files whose topic bounds may hold it (topic.MayHold on the adds'
// stats), and of those the rows whose topic column is its name. A file
// whose stats bound it to the one topic is counted from its stats; a file
// of several topics is read (occurred_at, source and topic columns), once
// per run for all its topics. So a difference is reported in the topic it
// belongs to, never in another topic of the group. Each table's log is read
// once per run, whatever the number of its topics. A grouped topic whose
// group table was deleted and created again (its registry entry names
// another table id) is an error naming `relay rebuild`, not a clean or an
// empty log. Results (and the _reconciliation rows) are per topic; the
// JSON report names the group table of a grouped topic's results.
//
// # How it narrows
//
// Counts first: the source counts rows per window over the (topic,
// occurred_at) index; the log counts events from the add statistics
// (numRecords, min/max occurred_at) and reads only the occurred_at column of
// files that straddle a window boundary. A window whose counts differ is
// bisected on counts until each differing range holds at most LeafRows rows,
// and only those ranges are diffed id by id (event_id and occurred_at
// columns). Check "counts" therefore cannot see a missing event and a
// duplicate that cancel out within one bisected range; Options.VerifyIDs
// diffs every window id by id.
//
// # When a window counts: the closed-window rule
//
// A window [start, end) is checked only when it is closed. In one
// REPEATABLE READ transaction that all source queries share, the reconciler
// samples the server clock T0 and pg_current_wal_insert_lsn() W0. A window is
// closed when
//
//	end + Lateness <= T0, and
//	the relay slot's confirmed_flush_lsn >= W0 (waited for up to DurableWait).
//
// The lateness allowance is the assumption that a row with occurred_at < end
// commits before end + Lateness. Under it every row of a closed window
// committed before T0, so it is visible in the check's snapshot and its
// commit LSN is below W0, which the relay has confirmed: it only confirms
// positions whose every event is in a committed Delta version. Windows that
// fail the rule are reported as skipped (open) with the reason. A row that
// breaks the allowance (committed after T0) is invisible to the snapshot; if
// the log already has it, a fresh lookup finds it and it is reported as a
// late commit instead of as unexpected.
//
// # Repairing what is missing
//
// Repair checks, reads every missing event's row back from the outbox,
// routes it with the mappings as the stream would, publishes it into its
// topic exactly once (package republish: safe beside the running relay
// and another repair), then checks the same windows again, a few rounds
// while events remain missing and something was published. Events the
// stream would have refused (their contract, their mapping) are not
// published: the run's record says why, and the check still counts them
// missing. The first check's _reconciliation rows say how many of their
// missing events the repair published (repaired, repair_id); the run's
// record and the _republished table name each one. Unexpected and
// duplicated events are never repaired: the log is append-only.
package reconcile
