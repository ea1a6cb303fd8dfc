package doctor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// database runs the checks on the source database.
type database struct {
	o    Options
	conn *pgx.Conn // nil when the connection failed
	r    *Report
}

// each runs f with the check's timeout, or records it as skipped when
// there is no connection.
func (d *database) each(ctx context.Context, check string, f func(ctx context.Context) error) {
	if d.conn == nil {
		d.r.skip(check, "not checked: no connection to the database (see the database check)")
		return
	}
	cctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	if err := f(cctx); err != nil {
		d.r.fail(check, err)
	}
}

// run runs the checks that need only the database.
func (d *database) run(ctx context.Context) {
	d.each(ctx, "wal_level", d.walLevel)
	d.each(ctx, "replication_slots", d.replicationSlots)
	d.each(ctx, "wal_senders", d.walSenders)
	d.each(ctx, "max_slot_wal_keep_size", d.walKeepSize)
	d.each(ctx, "publication", d.publication)
	d.each(ctx, "privileges", d.privileges)
	d.each(ctx, "clock_skew", d.clockSkew)
	d.each(ctx, "failover", d.failover)
}

func (d *database) walLevel(ctx context.Context) error {
	if err := pgsource.CheckWALLevel(ctx, d.conn); err != nil {
		return err
	}
	d.r.ok("wal_level", "logical")
	return nil
}

// replicationSlots: the relay's slot exists, or there is room for it.
func (d *database) replicationSlots(ctx context.Context) error {
	var max, used int
	var ours bool
	err := d.conn.QueryRow(ctx, `SELECT current_setting('max_replication_slots')::int, count(*),
		coalesce(bool_or(slot_name = $1), false) FROM pg_replication_slots`, d.o.Slot).Scan(&max, &used, &ours)
	if err != nil {
		return fmt.Errorf("read replication slots: %s", pgsource.RootCause(err))
	}
	switch {
	case ours:
		d.r.ok("replication_slots", "%d of %d in use, slot %s among them", used, max, d.o.Slot)
	case used >= max:
		return fmt.Errorf("all %d replication slots are in use and the relay needs one for slot %s: drop an unused one (SELECT slot_name, active FROM pg_replication_slots), or raise max_replication_slots (ALTER SYSTEM SET max_replication_slots = %d) and restart PostgreSQL", max, d.o.Slot, max+2)
	default:
		d.r.ok("replication_slots", "%d of %d in use: room for slot %s, which the first `relay run` creates", used, max, d.o.Slot)
	}
	return nil
}

// walSenders: a WAL sender is free for the relay's stream (or for a
// standby taking over).
func (d *database) walSenders(ctx context.Context) error {
	var max, used int
	err := d.conn.QueryRow(ctx, `SELECT current_setting('max_wal_senders')::int,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')`).Scan(&max, &used)
	if err != nil {
		return fmt.Errorf("read WAL senders: %s", pgsource.RootCause(err))
	}
	if used >= max {
		return fmt.Errorf("all %d WAL senders are in use (max_wal_senders) and the relay's stream needs one: raise max_wal_senders (ALTER SYSTEM SET max_wal_senders = %d) and restart PostgreSQL", max, max+2)
	}
	d.r.ok("wal_senders", "%d of %d in use", used, max)
	return nil
}

// walKeepSize: a slot that stops moving cannot fill the database's disk.
func (d *database) walKeepSize(ctx context.Context) error {
	var mb int64
	if err := d.conn.QueryRow(ctx, `SELECT setting::bigint FROM pg_settings WHERE name = 'max_slot_wal_keep_size'`).Scan(&mb); err != nil {
		return fmt.Errorf("read max_slot_wal_keep_size: %s", pgsource.RootCause(err))
	}
	if mb < 0 {
		return errors.New("max_slot_wal_keep_size is -1 (unlimited): a relay that stops reading keeps WAL on the server until its disk is full; set a limit the WAL disk can hold, e.g. ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf(); past it PostgreSQL invalidates the slot and the relay stops naming `relay bootstrap --recover` instead")
	}
	d.r.ok("max_slot_wal_keep_size", "%s: past it PostgreSQL invalidates the slot, and the relay stops naming the recovery", sizeMB(mb))
	return nil
}

// publication: the relay's preflight check of the publication and of the
// outbox tables it includes (columns, SELECT for the relay's role).
func (d *database) publication(ctx context.Context) error {
	err := migrations.CheckPublication(ctx, d.conn, migrations.Options{Publication: d.o.Publication, Mappings: d.o.Mappings})
	if err != nil {
		return err
	}
	tables, err := publishedTables(ctx, d.conn, d.o.Publication)
	if err != nil {
		return err
	}
	d.r.ok("publication", "%s publishes the INSERTs of %s", d.o.Publication, strings.Join(tables, ", "))
	return nil
}

func publishedTables(ctx context.Context, conn *pgx.Conn, pub string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, pub)
	if err != nil {
		return nil, fmt.Errorf("list the tables of publication %s: %s", pub, pgsource.RootCause(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// otherRoles are the roles deploy/sql/roles.sql creates besides the
// relay's, with what each needs on every outbox table.
var otherRoles = []struct{ role, privileges, command string }{
	{"deltabus_janitor", "SELECT, DELETE", "relay janitor"},
	{"deltabus_reconcile", "SELECT", "relay reconcile"},
}

// privileges: the relay's role may open a replication connection, and
// the other DeltaBus roles that exist have what their commands need.
func (d *database) privileges(ctx context.Context) error {
	var user string
	var super, repl bool
	err := d.conn.QueryRow(ctx, `SELECT rolname, rolsuper, rolreplication FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super, &repl)
	if err != nil {
		return fmt.Errorf("read the role's attributes: %s", pgsource.RootCause(err))
	}
	var errs []error
	if !super && !repl {
		errs = append(errs, fmt.Errorf("role %s lacks REPLICATION, which the relay's stream needs: ALTER ROLE %s REPLICATION (deploy/sql/roles.sql creates deltabus_relay with it)", user, pgx.Identifier{user}.Sanitize()))
	} else if err := replicationConnection(ctx, d.o.Source); err != nil {
		errs = append(errs, err)
	}
	tables, err := publishedTables(ctx, d.conn, d.o.Publication)
	if err != nil {
		return err
	}
	var checked []string
	for _, o := range otherRoles {
		var exists bool
		if err := d.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, o.role).Scan(&exists); err != nil {
			return fmt.Errorf("look up role %s: %s", o.role, pgsource.RootCause(err))
		}
		if !exists {
			continue
		}
		checked = append(checked, o.role)
		for _, t := range tables {
			var ok bool
			if err := d.conn.QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3)`, o.role, t, o.privileges).Scan(&ok); err != nil {
				return fmt.Errorf("check %s's privileges on %s: %s", o.role, t, pgsource.RootCause(err))
			}
			if !ok {
				errs = append(errs, fmt.Errorf("role %s (`%s`) lacks %s on %s: GRANT %s ON %s TO %s, or run deploy/sql/roles.sql again", o.role, o.command, o.privileges, t, o.privileges, t, o.role))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	what := fmt.Sprintf("%s may open a replication connection", user)
	if super {
		what += " (a superuser: least privilege wants deploy/sql/roles.sql's deltabus_relay)"
	}
	if len(checked) > 0 {
		what += "; " + strings.Join(checked, " and ") + " have what their commands need"
	}
	d.r.ok("privileges", "%s", what)
	return nil
}

// replicationConnection opens the relay's kind of connection and asks the
// server who it is, as the stream's first step does.
func replicationConnection(ctx context.Context, dsn string) error {
	conn, err := pgsource.ConnectReplication(ctx, dsn)
	if err != nil {
		return fmt.Errorf("cannot open a replication connection: %s; the role needs REPLICATION and pg_hba.conf must admit it to this database", pgsource.RootCause(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := pglogrepl.IdentifySystem(ctx, conn); err != nil {
		return fmt.Errorf("replication connection refused IDENTIFY_SYSTEM: %s", pgsource.RootCause(err))
	}
	return nil
}

// slot: the relay's slot is usable, or absent on a store that holds none
// of its events (a first start).
func (d *database) slot(ctx context.Context, store storage.Store) error {
	s, err := pgsource.ReadSlot(ctx, d.conn, d.o.Slot)
	if err != nil {
		return err
	}
	marked, knows := false, store != nil
	if knows {
		src, err := pgsource.Identify(ctx, d.conn, d.o.Slot)
		if err != nil {
			return err
		}
		id, err := catalog.ResolveAppID(ctx, store, src.Source, d.o.AppID)
		var ue *usererr.Error
		switch {
		case errors.As(err, &ue):
			return err // progress in the store that is not provably this source's
		case err != nil:
			knows = false // the store checks say why
		default:
			marked = id.Marker != nil
		}
	}
	switch {
	case !s.Exists && marked:
		return fmt.Errorf("replication slot %q does not exist but store %s already holds this relay's events: the slot was dropped or lost, so events may be missing; run `relay bootstrap --recover` to re-read the outbox into the topics and resume", d.o.Slot, store)
	case !s.Exists:
		d.r.ok("slot", "%s does not exist yet: the first `relay run` creates it and copies the outbox's rows (snapshot, then stream)%s", d.o.Slot, unknownStore(knows))
		return nil
	}
	if err := s.CheckUsable(d.conn.Config().Database); err != nil {
		return err
	}
	if s.WALStatus == "unreserved" {
		return fmt.Errorf("replication slot %q holds %s of WAL, past max_slot_wal_keep_size: PostgreSQL invalidates it at the next checkpoint unless the relay catches up; start the relay, or see why it lags (relay status)", d.o.Slot, sizeBytes(s.RetainedBytes))
	}
	holder := "inactive: no relay streams from it"
	if s.ActivePID != nil {
		holder = "streamed by " + s.HolderText() + " (a second relay needs --standby)"
	}
	headroom := ""
	if s.SafeWALSize != nil {
		headroom = ", " + sizeBytes(*s.SafeWALSize) + " before PostgreSQL invalidates it"
	}
	first := ""
	if knows && !marked {
		first = "; the store holds none of its events, so `relay run` starts it over as a first start (if this is not a new deployment, check DELTABUS_STORE)"
	}
	d.r.ok("slot", "%s: wal_status=%s, confirmed %s, holds %s of WAL%s; %s%s%s", d.o.Slot, s.WALStatus, s.ConfirmedLSN, sizeBytes(s.RetainedBytes), headroom, holder, first, unknownStore(knows))
	return nil
}

func unknownStore(knows bool) string {
	if knows {
		return ""
	}
	return " (whether the store holds this relay's events is unknown: see the store checks)"
}

// clockSkew compares this host's clock with the database's, from the
// middle of a round trip; latency, `relay consume --from-time` and
// retention ages set the two against each other.
func (d *database) clockSkew(ctx context.Context) error {
	var db time.Time
	t0 := time.Now()
	if err := d.conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&db); err != nil {
		return fmt.Errorf("read the database's clock: %s", pgsource.RootCause(err))
	}
	rtt := time.Since(t0)
	skew := db.Sub(t0.Add(rtt / 2))
	if skew.Abs()-rtt/2 > d.o.MaxClockSkew {
		return fmt.Errorf("this host's clock is %v %s the database's (more than %v): end-to-end latency, `relay consume --from-time` and retention ages compare the two; synchronise both with NTP (chrony, systemd-timesyncd)", skew.Abs().Round(time.Millisecond), aheadBehind(skew), d.o.MaxClockSkew)
	}
	d.r.ok("clock_skew", "%v (round trip %v; at most %v)", skew.Round(time.Millisecond), rtt.Round(time.Microsecond), d.o.MaxClockSkew)
	return nil
}

func aheadBehind(skew time.Duration) string {
	if skew > 0 {
		return "behind"
	}
	return "ahead of"
}

func sizeMB(mb int64) string {
	if mb >= 1024 && mb%1024 == 0 {
		return strconv.FormatInt(mb/1024, 10) + " GB"
	}
	return strconv.FormatInt(mb, 10) + " MB"
}

func sizeBytes(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
