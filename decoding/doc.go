// Package decoding turns the pgoutput logical replication stream
// (proto_version 1) into transactions: a *Begin, the transaction's *Row
// values (and *Truncate, transactional *LogicalMessage), then a *Commit.
//
// # Guarantees
//
//   - No I/O. Decoder.Decode parses the XLogData payload it is given and
//     nothing else; the caller owns the connection, the positions it
//     acknowledges and the buffers.
//   - Bounded memory per message. Every length and count read from the wire
//     is checked against the bytes actually present before anything is
//     allocated, so a message costs memory proportional to its size. Decode
//     never panics, whatever the bytes (FuzzDecode checks this); malformed
//     or out-of-place messages yield an error wrapping ErrProtocol, and the
//     decoder's state is then as it was before the call.
//   - Order preserved. Messages come out in the order they go in; each Row
//     carries its transaction's Xid, commit LSN and commit time, and Seq, its
//     0-based position among the rows of that transaction (all relations
//     counted, truncates and logical messages not). Begin and Commit must
//     alternate, and a Commit must name the commit LSN its Begin announced.
//   - Relation changes followed. A Relation message that differs from the
//     cached one (ALTER TABLE ADD/DROP COLUMN, a type change, a rename)
//     replaces it; rows decoded afterwards carry the new *Relation, rows
//     decoded before keep the old one. A tuple whose column count differs
//     from its relation's is an error naming the relation.
//
// # Aliasing
//
// Datum.Data and LogicalMessage.Content alias the walData passed to Decode:
// they are valid until the next Decode (in practice, until the caller's
// receive buffer is reused). Row.Detach and LogicalMessage.Detach copy them
// out. Row and Datum slices themselves are never reused by the decoder.
//
// # Not rows
//
// Relation, Type and Origin messages yield nil. TRUNCATE yields a *Truncate,
// not a Row (Row never has Op == OpTruncate); Decoder.Truncates counts them.
// Streaming (proto_version 2) and two-phase messages are protocol errors.
//
// # Values
//
// pgoutput sends values in their text output form unless the binary option
// is on. TextValue, ParseInt64, ParseInt32 and ParseTimestamptz are fast,
// allocation-free readers for the common outbox columns (ParseTimestamptz
// expects DateStyle ISO, which the replication connection must use);
// DecodeValue decodes any column with a pgx type map (Decoder.TypeMap).
package decoding
