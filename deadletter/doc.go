// Package deadletter is the way back from _dead_letter: Read lists dead
// letters by topic, type, source, id, reason and commit time, each with
// the latest redrive that considered it (republish.AuditTable); Redrive
// publishes the chosen ones their topic now admits (package republish).
//
// A dead letter is one of:
//
//   - an event its contract refused, its topic's table would not take, or
//     whose personal data could not be protected: the dead letter holds
//     the event whole (outbox.Refused), and the redrive publishes it as
//     it is, judged again;
//   - a row the router could not make an event of (its mapping, a bad
//     value): its raw row is routed again with the mappings of now
//     (outbox.RowRouter), as the stream would route it;
//   - an UPDATE of an outbox row, or a dead letter whose personal fields
//     were redacted: never redriven (an UPDATE is no event; a redacted
//     payload is not the event's), each refused with why.
//
// A redriven event keeps its event id, source, commit_lsn, seq, xid and
// commit time, and the events of each source are published in their
// commit order. Dead letters stay in _dead_letter (it is append-only):
// their state, and the latest reason of those that still fail, are the
// newest _republished row of each (by source, commit LSN and seq, which
// a redrive keeps). Dead letters already redriven are left out of a
// redrive unless asked for again (they are then found present).
package deadletter
