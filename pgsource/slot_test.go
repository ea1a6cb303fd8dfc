package pgsource

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestReadSlot reads a slot that does not exist, a free one and one a
// walsender streams from: only the last has a holder, named by its
// application_name and address, and a reply age once it has replied.
func TestReadSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int primary key)`)
	db.Exec(t, `CREATE PUBLICATION p FOR TABLE t`)
	conn := db.Conn(t)

	s, err := ReadSlot(ctx, conn, "none")
	if err != nil || s.Exists || s.ActivePID != nil {
		t.Fatalf("a missing slot: %+v, %v", s, err)
	}
	repl, err := pgconn.Connect(ctx, db.ReplDSN+"&application_name=slot-reader")
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(ctx)
	if _, err := pglogrepl.CreateReplicationSlot(ctx, repl, "s1", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err = ReadSlot(ctx, conn, "s1")
	if err != nil || !s.Exists || s.Plugin != "pgoutput" || s.Database != db.Name || s.ActivePID != nil || s.Holder != "" ||
		s.ReplyAge != nil || s.ConfirmedLSN == 0 || s.RestartLSN == 0 || s.WALStatus != "reserved" {
		t.Fatalf("a free slot: %+v, %v", s, err)
	}
	if err := s.CheckUsable(db.Name); err != nil {
		t.Fatalf("a free pgoutput slot of this database: %v", err)
	}
	if s.HolderText() != "no process" {
		t.Errorf("a free slot's holder: %q", s.HolderText())
	}

	err = pglogrepl.StartReplication(ctx, repl, "s1", s.ConfirmedLSN, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'p'"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{WALWritePosition: s.ConfirmedLSN}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err = ReadSlot(ctx, conn, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if s.ActivePID != nil && s.ReplyAge != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a streaming slot never showed its holder and reply: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if int(*s.ActivePID) != int(repl.PID()) || s.Holder != "slot-reader from 127.0.0.1" || *s.ReplyAge < 0 || *s.ReplyAge > 30*time.Second {
		t.Errorf("a streaming slot: pid %d (walsender %d), holder %q, reply age %v", *s.ActivePID, repl.PID(), s.Holder, *s.ReplyAge)
	}
	if got := s.HolderText(); !strings.Contains(got, "slot-reader from 127.0.0.1") {
		t.Errorf("HolderText of a streaming slot: %q", got)
	}
}
