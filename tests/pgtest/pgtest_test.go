package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestSlotReadsAChange proves the harness: a logical slot on the test
// database sees an inserted row through pgoutput.
func TestSlotReadsAChange(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db.Exec(t, `CREATE TABLE t (id int primary key, v text)`)
	db.Exec(t, `CREATE PUBLICATION p FOR TABLE t`)

	conn, err := pgconn.Connect(ctx, db.ReplDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, "s1", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO t VALUES (1, 'hello')`)
	err = pglogrepl.StartReplication(ctx, conn, "s1", 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'p'"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("no insert seen: %v", err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			continue
		}
		if len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			t.Fatal(err)
		}
		m, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			t.Fatal(err)
		}
		if ins, ok := m.(*pglogrepl.InsertMessage); ok {
			if got := string(ins.Tuple.Columns[1].Data); got != "hello" {
				t.Fatalf("got %q, want hello", got)
			}
			return
		}
	}
}

// TestMinMajorIsMigrations: pgtest's oldest major is the one migrations
// supports.
func TestMinMajorIsMigrations(t *testing.T) {
	if pgtest.MinMajor != migrations.MinMajor {
		t.Fatalf("pgtest.MinMajor %d, migrations.MinMajor %d", pgtest.MinMajor, migrations.MinMajor)
	}
}
