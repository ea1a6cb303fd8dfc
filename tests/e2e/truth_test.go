package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// truthRow is one outbox insert as PostgreSQL committed it.
type truthRow struct {
	ID        string
	Topic     string
	CommitLSN pglogrepl.LSN
	Seq       int
}

// truthSlot is a second logical slot, created before the load, that records
// the source's exact commit order independently of the relay.
type truthSlot struct {
	db   *pgtest.DB
	name string
	pub  string
}

func newTruthSlot(t testing.TB, db *pgtest.DB, pub string) *truthSlot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("truth_%08x", rand.Uint32()) // slot names are cluster-wide: tests may run in parallel
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, name, "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	return &truthSlot{db: db, name: name, pub: pub}
}

// read drains the slot up to the current WAL insert position and returns
// every outbox insert in commit order.
func (s *truthSlot) read(t testing.TB) []truthRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sql, err := pgx.Connect(ctx, s.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer sql.Close(ctx)
	var endStr string
	if err := sql.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&endStr); err != nil {
		t.Fatal(err)
	}
	end, _ := pglogrepl.ParseLSN(endStr)
	conn, err := pgconn.Connect(ctx, s.db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = pglogrepl.StartReplication(ctx, conn, s.name, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", s.pub)}})
	if err != nil {
		t.Fatal(err)
	}
	dec := decoding.NewDecoder()
	var out []truthRow
	var pos pglogrepl.LSN
	for pos < end || dec.InTransaction() {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("truth slot: %v", err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			if pkm.ServerWALEnd > pos && !dec.InTransaction() {
				pos = pkm.ServerWALEnd
			}
			if pkm.ReplyRequested {
				_ = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos})
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			m, err := dec.Decode(xld.WALData)
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *decoding.Row:
				if m.Op == decoding.OpInsert {
					id, _ := decoding.TextValue(m.New[colIndex(m.Relation, "id")])
					tp, _ := decoding.TextValue(m.New[colIndex(m.Relation, "topic")])
					out = append(out, truthRow{ID: id, Topic: tp, CommitLSN: m.CommitLSN, Seq: m.Seq})
				}
			case *decoding.Commit:
				pos = max(pos, m.EndLSN)
			}
		}
	}
	return out
}

func colIndex(rel *decoding.Relation, name string) int {
	for i, c := range rel.Columns {
		if c.Name == name {
			return i
		}
	}
	panic("no column " + name)
}
