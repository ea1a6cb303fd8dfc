package decoding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// decodeAll decodes the stream live, straight from the receive buffer as the
// relay does, detaching what it keeps; it stops at the end marker.
func decodeAll(t *testing.T, ctx context.Context, conn *pgconn.PgConn, slot string, pluginArgs []string) []Message {
	t.Helper()
	d := NewDecoder()
	var out []Message
	err := drain(ctx, conn, slot, pluginArgs, func(wal []byte) (bool, error) {
		m, err := d.Decode(wal)
		if err != nil {
			return false, err
		}
		switch m := m.(type) {
		case nil:
			return false, nil
		case *Row:
			m.Detach()
		case *LogicalMessage:
			if m.Prefix == endPrefix {
				return true, nil
			}
			m.Detach()
		}
		out = append(out, m)
		return false, nil
	})
	if err != nil {
		t.Fatalf("decode stream: %v", err)
	}
	return out
}

// summaries renders messages one per line; xids are shown as their index in
// xids, so expectations do not depend on the server's xid counter.
func summaries(ms []Message, xids []uint32) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		switch m := m.(type) {
		case *Begin:
			out[i] = fmt.Sprintf("begin xid=%d", slices.Index(xids, m.Xid))
		case *Commit:
			out[i] = "commit"
		case *Row:
			out[i] = summarizeRow(m)
		case *LogicalMessage:
			out[i] = fmt.Sprintf("message transactional=%v prefix=%s content=%s", m.Transactional, m.Prefix, m.Content)
		case *Truncate:
			names := make([]string, len(m.Relations))
			for j, r := range m.Relations {
				names[j] = r.qualified()
			}
			out[i] = fmt.Sprintf("truncate %v cascade=%v restart=%v", names, m.Cascade, m.RestartIdentity)
		default:
			out[i] = fmt.Sprintf("%T", m)
		}
	}
	return out
}

func summarizeRow(r *Row) string {
	op := map[Op]string{OpInsert: "insert", OpUpdate: "update", OpDelete: "delete"}[r.Op]
	cols := make([]string, len(r.Relation.Columns))
	for i, c := range r.Relation.Columns {
		cols[i] = c.Name
	}
	s := fmt.Sprintf("%s %s(%s) seq=%d", op, r.Relation.qualified(), strings.Join(cols, " "), r.Seq)
	if r.Old != nil {
		s += " old=" + summarizeDatums(r.Old)
	}
	if r.New != nil {
		s += " new=" + summarizeDatums(r.New)
	}
	return s
}

func summarizeDatums(ds []Datum) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		switch d.Kind {
		case DatumNull:
			parts[i] = "NULL"
		case DatumUnchanged:
			parts[i] = "UNCHANGED"
		default:
			parts[i] = string(d.Data)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkTransactions checks each Begin..Commit span: the xid, commit LSNs
// between the WAL positions around the commit (bounds[i] before transaction
// i, bounds[i+1] after it), EndLSN past CommitLSN, and the transaction
// context of every row.
func checkTransactions(t *testing.T, ms []Message, xids []uint32, bounds []pglogrepl.LSN) {
	t.Helper()
	var begin *Begin
	var lastCommit pglogrepl.LSN
	n := 0
	for _, m := range ms {
		switch m := m.(type) {
		case *Begin:
			begin = m
			if m.Xid != xids[n] || m.CommitTime.Location().String() != "UTC" {
				t.Errorf("transaction %d: begin %+v, want xid %d in UTC", n, m, xids[n])
			}
			if m.CommitLSN <= lastCommit || m.CommitLSN <= bounds[n] || m.CommitLSN >= bounds[n+1] {
				t.Errorf("transaction %d: commit LSN %s outside (%s, %s)", n, m.CommitLSN, bounds[n], bounds[n+1])
			}
		case *Commit:
			if m.CommitLSN != begin.CommitLSN || !m.CommitTime.Equal(begin.CommitTime) ||
				m.EndLSN <= m.CommitLSN || m.EndLSN > bounds[n+1] {
				t.Errorf("transaction %d: commit %+v after begin %+v (next bound %s)", n, m, begin, bounds[n+1])
			}
			n, begin, lastCommit = n+1, nil, m.CommitLSN
		case *Row:
			if begin == nil || m.Xid != begin.Xid || m.CommitLSN != begin.CommitLSN || !m.CommitTime.Equal(begin.CommitTime) {
				t.Errorf("row %+v does not carry its transaction's context %+v", m, begin)
			}
		}
	}
	if n != len(xids) {
		t.Errorf("saw %d transactions, want %d", n, len(xids))
	}
}
