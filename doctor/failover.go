package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgsource"
)

// failoverSlotMajor is the first major whose standbys synchronise logical
// slots (bootstrap.FailoverSlotMajor).
const failoverSlotMajor = 17

// failover: what a promotion of a standby would do to the relay. With
// PostgreSQL 17 and later, a failover slot, a standby that synchronises it
// and the primary's synchronized_standby_slots make it seamless (the relay
// resumes by itself, nothing lost, nothing phantom); anything less means a
// recovery after the promotion. The standbys' own settings are read where
// the DSN lists them as hosts (an HA DSN: host=primary,standby).
func (d *database) failover(ctx context.Context) error {
	var standbys, physical []string
	rows, err := d.conn.Query(ctx, `SELECT coalesce(nullif(application_name, ''), host(client_addr), pid::text) FROM pg_stat_replication
		WHERE pid NOT IN (SELECT active_pid FROM pg_replication_slots WHERE slot_type = 'logical' AND active_pid IS NOT NULL)`)
	if err == nil {
		standbys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("read the standbys streaming from this server: %s", pgsource.RootCause(err))
	}
	rows, err = d.conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY 1`)
	if err == nil {
		physical, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("read physical replication slots: %s", pgsource.RootCause(err))
	}
	major := migrations.Major(d.conn.PgConn())
	switch {
	case len(standbys) == 0 && len(physical) == 0:
		d.r.ok("failover", "no standby streams from this server: nothing to fail over to")
		return nil
	case major < failoverSlotMajor:
		d.r.ok("failover", "PostgreSQL %d keeps logical slots off its standbys (17 and later synchronise failover slots): after a promotion the relay stops, naming `relay bootstrap --recover`, which records any event the old primary published that the new one lacks", major)
		return nil
	}
	problems := d.primaryFailover(ctx, physical)
	problems = append(problems, d.standbysFailover(ctx)...)
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	d.r.ok("failover", "slot %s is a failover slot, synchronized_standby_slots lists the standbys' slots (%s): after a promotion the relay resumes by itself, nothing lost, nothing phantom",
		d.o.Slot, strings.Join(physical, ", "))
	return nil
}

// primaryFailover checks the primary's side: the relay's slot is a
// failover slot, and logical changes wait for the standbys' slots.
func (d *database) primaryFailover(ctx context.Context, physical []string) []error {
	var problems []error
	s, err := pgsource.ReadSlot(ctx, d.conn, d.o.Slot)
	switch {
	case err != nil:
		problems = append(problems, err)
	case s.Exists && s.Failover != nil && !*s.Failover:
		problems = append(problems, fmt.Errorf("replication slot %s is not a failover slot, so no standby keeps it and a promotion needs `relay bootstrap --recover`: restart the relay without --failover-slot=false (it alters the slot before it streams)", d.o.Slot))
	}
	var sync string
	if err := d.conn.QueryRow(ctx, "SELECT current_setting('synchronized_standby_slots')").Scan(&sync); err != nil {
		return append(problems, fmt.Errorf("read synchronized_standby_slots: %s", pgsource.RootCause(err)))
	}
	if strings.TrimSpace(sync) == "" {
		hint := "'<the standbys' physical slots>'"
		if len(physical) > 0 {
			hint = "'" + strings.Join(physical, ",") + "'"
		}
		problems = append(problems, fmt.Errorf("synchronized_standby_slots is empty: the relay may receive changes a standby has not, and after a promotion they are phantoms (recorded, but lost with the old primary); ALTER SYSTEM SET synchronized_standby_slots = %s; SELECT pg_reload_conf()", hint))
	}
	return problems
}

// standbysFailover reads, on every host of the DSN that is a standby, the
// settings slot synchronisation needs.
func (d *database) standbysFailover(ctx context.Context) []error {
	cfg, err := pgx.ParseConfig(d.o.Source)
	if err != nil {
		return nil // the database check reported it
	}
	var problems []error
	for _, addr := range hostsOf(cfg) {
		one := cfg.Copy()
		one.Host, one.Port, one.Fallbacks, one.ValidateConnect = addr.host, addr.port, nil, nil
		one.ConnectTimeout = 5 * time.Second
		if err := pgsource.Configure(&one.Config); err != nil {
			return append(problems, err)
		}
		conn, err := pgx.ConnectConfig(ctx, one)
		if err != nil {
			continue // the primary, or a host down: not this check's to report
		}
		problems = append(problems, d.standbyFailover(ctx, conn, addr.String())...)
		conn.Close(context.WithoutCancel(ctx))
	}
	return problems
}

// standbyFailover checks one host, if it is a standby.
func (d *database) standbyFailover(ctx context.Context, conn *pgx.Conn, where string) []error {
	var recovering bool
	var walLevel, syncSlots, feedback, primarySlot string
	err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('wal_level'), current_setting('sync_replication_slots'),
		current_setting('hot_standby_feedback'), current_setting('primary_slot_name')`).Scan(&recovering, &walLevel, &syncSlots, &feedback, &primarySlot)
	if err != nil || !recovering {
		return nil
	}
	var problems []error
	need := func(ok bool, format string, args ...any) {
		if !ok {
			problems = append(problems, fmt.Errorf("standby %s: "+format, append([]any{where}, args...)...))
		}
	}
	need(walLevel == "logical", "wal_level is %s, a promoted standby needs logical for the relay: ALTER SYSTEM SET wal_level = logical and restart it", walLevel)
	need(syncSlots == "on", "sync_replication_slots is off, so it keeps no copy of the relay's slot: ALTER SYSTEM SET sync_replication_slots = on (and a dbname in its primary_conninfo); SELECT pg_reload_conf()")
	need(feedback == "on", "hot_standby_feedback is off, which slot synchronisation needs: ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf()")
	need(primarySlot != "", "primary_slot_name is empty: it must stream through a physical slot that synchronized_standby_slots lists; set primary_slot_name")
	var synced bool
	if err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(synced AND NOT temporary), false) FROM pg_replication_slots WHERE slot_name = $1`, d.o.Slot).Scan(&synced); err == nil && len(problems) == 0 {
		need(synced, "holds no synchronised copy of slot %s yet (it appears within seconds of the slot's first use)", d.o.Slot)
	}
	return problems
}

type hostPort struct {
	host string
	port uint16
}

func (h hostPort) String() string { return net.JoinHostPort(h.host, fmt.Sprint(h.port)) }

// hostsOf lists the distinct hosts a DSN names.
func hostsOf(cfg *pgx.ConnConfig) []hostPort {
	out := []hostPort{{cfg.Host, cfg.Port}}
	for _, f := range cfg.Fallbacks {
		h := hostPort{f.Host, f.Port}
		seen := false
		for _, o := range out {
			seen = seen || o == h
		}
		if !seen {
			out = append(out, h)
		}
	}
	return out
}
