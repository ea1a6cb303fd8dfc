// Package republish publishes events into their topics outside the
// relay's stream, exactly once: the dead letters a redrive brings back
// (package deadletter) and the events reconcile found missing, read back
// from their outbox rows (reconcile.Repair). It is the one way anything
// but the stream and a snapshot writes events; the argument is "Events
// published outside the stream" in package catalog.
//
// # Guarantees of Publish
//
//   - Judged as the stream judges: an event whose topic's table its
//     source's relay would not write (missing, another writer's, lost by
//     its claim), whose topic a rebuild is copying, whose contract refuses
//     it (contract.Cache.Judge, whatever the topic's policy), or whose
//     personal data cannot be protected is refused, with the reason; the
//     marked fields of the others are encrypted (pii.Protector).
//   - Once: an event is written into its topic only as its source's, only
//     when the topic does not hold its (source, event id), and a commit
//     that another writer overtook with one of its events writes nothing
//     (delta.CommitActions.Conflict, and the source's republish counter,
//     catalog.RepublishAppID). A second run finds the events present;
//     runs at once, beside a running relay, publish each event once.
//   - As it was: each event keeps its event id, source, commit_lsn, seq,
//     xid and times; the events of a (topic, source) are committed
//     together, in the order given (a redrive gives each source's commit
//     order).
//   - Recorded: every run writes its catalog.RepublishRun (who, where,
//     when, what it was asked, how many were published, present and
//     refused, which table versions hold them) and one AuditTable row per
//     event with what became of it. The commits name the run in their
//     commitInfo's operationParameters (deltabusRun, deltabusKind).
//   - Safe to stop: what a run committed stands; its record stays
//     "running"; the next run finds those events present. Data files a
//     run writes are covered by its lease (catalog.Lease) until they are
//     committed or deleted.
package republish
