package decoding

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// endPrefix marks the end of a test workload: a non-transactional logical
// message emitted after everything else.
const endPrefix = "deltabus-test-end"

func emitEnd(t testing.TB, db *pgtest.DB) {
	db.Exec(t, `SELECT pg_logical_emit_message(false, '`+endPrefix+`', '')`)
}

// replSlot opens a replication connection to db and creates a pgoutput slot
// on it (before the workload, so the slot sees all of it). Slots are global
// to the server, so the slot is named after the test's database and tag.
func replSlot(t testing.TB, ctx context.Context, db *pgtest.DB, tag string) (*pgconn.PgConn, string) {
	t.Helper()
	slot := tag + "_" + db.Name
	slot = slot[:min(len(slot), 63)]
	conn, err := pgconn.Connect(ctx, db.ReplDSN)
	if err != nil {
		t.Fatalf("replication connection: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatalf("create slot %s: %v", slot, err)
	}
	return conn, slot
}

// pgoutputArgs are the plugin arguments of the relay's stream
// (proto_version 1, messages on) plus extra ones.
func pgoutputArgs(pub string, extra ...string) []string {
	return append([]string{"proto_version '1'", "publication_names '" + pub + "'", "messages 'true'"}, extra...)
}

// drain starts replication with pluginArgs and hands each XLogData payload
// to fn, live from the receive buffer, until fn sees the end marker (fn
// returns true) or ctx expires.
func drain(ctx context.Context, conn *pgconn.PgConn, slot string, pluginArgs []string, fn func(wal []byte) (bool, error)) error {
	err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: pluginArgs})
	if err != nil {
		return fmt.Errorf("start replication on %s: %w", slot, err)
	}
	for {
		raw, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		switch msg := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("server error: %s", msg.Message)
		case *pgproto3.CopyData:
			if msg.Data[0] != pglogrepl.XLogDataByteID {
				continue // keepalives: nothing to acknowledge in a test
			}
			xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
			if err != nil {
				return fmt.Errorf("parse XLogData: %w", err)
			}
			done, err := fn(xld.WALData)
			if err != nil || done {
				return err
			}
		}
	}
}

// capture drains the slot and returns a copy of every payload, the end
// marker excluded.
func capture(t testing.TB, conn *pgconn.PgConn, slot string, pluginArgs []string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var msgs [][]byte
	err := drain(ctx, conn, slot, pluginArgs, func(wal []byte) (bool, error) {
		if wal[0] == 'M' && isEndMarker(wal) {
			return true, nil
		}
		msgs = append(msgs, append([]byte(nil), wal...))
		return false, nil
	})
	if err != nil {
		t.Fatalf("drain %s: %v", slot, err)
	}
	return msgs
}

func isEndMarker(wal []byte) bool {
	m, err := NewDecoder().Decode(wal)
	lm, ok := m.(*LogicalMessage)
	return err == nil && ok && lm.Prefix == endPrefix
}
