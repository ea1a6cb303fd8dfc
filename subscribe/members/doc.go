// Package members serves a consumer group's events to any number of
// parallel members, with per-key order: every event goes to one member at
// a time, and an event's successor of the same key is handed out only
// once it was acknowledged (or its lease ran out and it was handed out
// again). Members join, crash and leave at any time; the group's position
// and its events in flight survive restarts of every process; any number
// of processes may serve one group at once. `relay serve` (package
// subscribe/serve) puts it on HTTP for members in any language; Consume
// runs a Go member against a Source: Groups in process, or serve.Client.
//
// # The group's state and its log
//
// A group of a topic has one state, kept in the DeltaBus store under
// _deltabus/members/<group>/<topic>/ (catalog.MemberDir):
//
//   - Low: every event before it is acknowledged (or dropped as a
//     duplicate); an epoch, which a reset moves on; the Delta table id
//     its positions refer to;
//   - the acknowledged positions at or after Low (offset ranges);
//   - each event handed out and not acknowledged: its delivery count, the
//     member, its lease's end, a nack's retry time.
//
// Positions are subscribe's: (Delta version, offset among the topic's
// events of the version), the same for every reader of the table.
//
// Every change is an entry of the group's log, log/<seq>.json, written
// with storage.Store.PutIfAbsent at the sequence number after the state
// it was computed against: the atomic step the Delta log itself is built
// on, on local disk (link(2)) and S3 (If-None-Match), and no other
// coordination. Of two servers writing entry n, exactly one lands; the
// other reads it, applies it, computes its own change again against the
// new state and tries n+1. So the entries form one sequence, each valid
// against the state before it, and every server that applies them in
// order (apply is deterministic and reads nothing else) holds the same
// state. A snapshot, snapshots/<seq>.json, is the state after entry seq;
// a server starts from the newest snapshot and the entries after it.
//
// A server makes its changes through one committer per group: requests
// queue intents (receive, ack, nack, reset), the committer turns all that
// are queued into one entry (group commit: one put however many members
// asked), puts it, applies it and answers them. A request is answered
// only after its entry landed: a member holds an event only if the store
// says so, and an acknowledgement answered is durable.
//
// # Per-key order
//
// Each server reads the topic from Low on, in table order, into an index
// that queues each key's unacknowledged events. Rule: an entry leases an
// event only if, in the state it follows, (a) no earlier event of its key
// at or after Low is unacknowledged, (b) the event is not leased (no
// lease, or its lease ended), and (c) a nack's retry time passed. The
// writer checks (a) with its index, which holds every event from Low up
// to what it read, and (b) and (c) with the state. Since each entry is
// computed against exactly the state it follows, the rule holds for the
// log's whole sequence, whichever server wrote which entry. So:
//
//   - one member at a time: an event is leased again only when its lease
//     ended or was given back (a member slower than its visibility may
//     still be working when the next one starts: that is the lease's
//     contract, as in SQS; an acknowledgement with the old delivery
//     number is then refused);
//   - per key, in commit order: E2 after E1 of the same key is leased
//     only in an entry after the one that acknowledged E1, and E1's
//     acknowledgement was accepted only from the member holding E1's
//     current delivery. So E2's handling starts after E1's handling by
//     the member whose acknowledgement counted ended; members joining or
//     leaving change nothing, and a crashed member's events are handed
//     out again, each before its successors, when their leases end.
//
// # At least once; duplicates only from redelivery
//
// An event is acknowledged only by an entry (Low moves only past
// acknowledged or skipped events, computed by the writer from its index;
// it never passes an event not acknowledged). Every event at or after Low
// is either acknowledged, in flight, or not handed out yet: none is ever
// dropped. An event is handed out again only when it was not
// acknowledged: its lease ran out or was given back, or the group was
// reset. A restart of every process reads the same log: nothing changes.
// A put whose outcome is unknown (a timeout) fails its requests; their
// members retry, and the entry, if it landed, is read like any other (a
// lease that nobody received ends with its visibility; a repeated ack of
// an acknowledged event succeeds again).
//
// Duplicates in the topic itself (the same source and event_id written
// twice) are acknowledged without delivery, as a skip in an entry, when
// the server that writes the entry has read the first copy within the
// last Options.Dedup events.
//
// # Clean-up
//
// After a snapshot at seq S, entries up to S (and older snapshots) are
// deleted once they are a minute older than the newest entry, by the
// store's clock (modification times, compared with each other). A writer
// may put entry n+1 only while it knew n to be the head less than
// confirmFor (3 s) ago, and gives each put putTimeout (20 s). Should a
// writer that stalled still put entry n+1 after clean-up deleted an
// entry n+1 written by someone else, that entry was written after the
// writer last saw the head, hence less than confirmFor + putTimeout
// before the put, which is less than the minute clean-up waits: it cannot
// have been deleted. The rule is delta's (sink/delta's log clean-up,
// writers' ReloadAfter), with shorter times. A reader that finds a gap
// after its snapshot reads the newest snapshot again.
//
// # Retention
//
// The topic's log clean-up and VACUUM do not know members' groups unless
// the group is protected (Protect): then maintenance keeps what the
// group has not acknowledged (every version from its Low), up to the
// protection's maximum hold, and releases the group, with an error in the
// log and a metric, past it. An unprotected group whose position
// retention passed stops with subscribe's RetentionError until it is
// reset.
package members
