package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgsource"
)

// exportedSlot is a freshly created slot whose exported snapshot stays
// usable while conn is open and idle.
type exportedSlot struct {
	conn            *pgconn.PgConn
	consistentPoint pglogrepl.LSN
	snapshotName    string
	systemID        string
	takenAt         time.Time // commit_time of every snapshot row
}

// close ends the replication connection; the exported snapshot dies with it
// (transactions that already imported it keep it), the slot stays.
func (s *exportedSlot) close() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.conn.Close(ctx)
		s.conn = nil
	}
}

// dropSlot removes the slot if it exists. A slot still in use after a
// grace period (the consumer of a killed relay takes a moment to go away)
// is an error: another relay is running or bootstrapping.
func dropSlot(ctx context.Context, sql *pgx.Conn, name string) (bool, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var pid *int32
		err := sql.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read replication slot %q: %w", name, err)
		}
		if pid == nil {
			break
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("replication slot %q is in use by another process (pid %d), probably another relay or its bootstrap: stop it first, or start this one with --standby once the other is streaming", name, *pid)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := sql.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name); err != nil {
		return false, fmt.Errorf("drop replication slot %q: %w", name, err)
	}
	return true, nil
}

// FailoverSlotMajor is the first PostgreSQL major whose standbys can
// synchronise a logical slot created with FAILOVER.
const FailoverSlotMajor = 17

// createExportedSlot creates the logical slot with an exported snapshot on
// a new replication connection, which the caller must close. With failover,
// on PostgreSQL 17 and later, the slot is a failover slot: standbys with
// sync_replication_slots keep a copy, and after a promotion the relay
// resumes from it.
func createExportedSlot(ctx context.Context, dsn, slot string, failover bool) (*exportedSlot, error) {
	conn, err := pgsource.ConnectReplication(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s := &exportedSlot{conn: conn}
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("identify system: %w", err)
	}
	s.systemID = sys.SystemID
	var res pglogrepl.CreateReplicationSlotResult
	if failover && migrations.Major(conn) >= FailoverSlotMajor {
		res, err = pglogrepl.ParseCreateReplicationSlot(conn.Exec(ctx,
			fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)", slot)))
	} else {
		res, err = pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("create replication slot %q with an exported snapshot: %w", slot, err)
	}
	s.takenAt = time.Now().UTC().Truncate(time.Microsecond)
	s.snapshotName = res.SnapshotName
	if s.consistentPoint, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
		s.close()
		return nil, fmt.Errorf("slot %q consistent point %q: %w", slot, res.ConsistentPoint, err)
	}
	if s.consistentPoint == 0 || s.snapshotName == "" {
		s.close()
		return nil, fmt.Errorf("slot %q: server returned no consistent point or snapshot", slot)
	}
	return s, nil
}
