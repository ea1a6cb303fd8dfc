package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

type statusReport struct {
	Slot   relay.SlotInfo `json:"slot"`
	WALLSN string         `json:"currentWalLsn"`
	Topics []topicStatus  `json:"topics"`
}

type topicStatus struct {
	Topic      string `json:"topic"`
	Version    int64  `json:"version"`
	TxnVersion string `json:"txnLsn"`
	Files      int    `json:"files"`
	Records    int64  `json:"records"`
	// Problem is set when the table is missing or unreadable, or the topic
	// is paused for a rebuild (the slot is then held at the pause).
	Problem string `json:"problem,omitempty"`
}

func cmdStatus(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "status", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, sf.source)
	if err != nil {
		return fail(env, exitFailure, fmt.Errorf("cannot connect to PostgreSQL: %w; check DELTABUS_SOURCE", err))
	}
	defer conn.Close(ctx)
	var rep statusReport
	if rep.Slot, err = relay.ReadSlot(ctx, conn, sf.slot); err != nil {
		return fail(env, exitFailure, err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&rep.WALLSN); err != nil {
		return fail(env, exitFailure, err)
	}
	if sf.store != "" {
		store, err := openStore(ctx, sf.store)
		if err != nil {
			return fail(env, exitUsage, err)
		}
		if rep.Topics, err = topicStatuses(ctx, store, "deltabus-"+sf.slot); err != nil {
			return fail(env, exitFailure, err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return exitOK
	}
	printStatus(env, rep)
	return exitOK
}

func topicStatuses(ctx context.Context, store storage.Store, appID string) ([]topicStatus, error) {
	names, err := relay.ListTopics(ctx, store)
	if err != nil {
		return nil, err
	}
	var out []topicStatus
	for _, n := range names {
		ts := topicStatus{Topic: n, Version: -1}
		snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, n), -1)
		switch {
		case errors.Is(err, delta.ErrNoTable):
			ts.Problem = "table missing: `relay rebuild --topic " + n + "` restores it from the outbox"
		case err != nil:
			ts.Problem = fmt.Sprintf("table unreadable (%v): move it away, then `relay rebuild --topic %s`", err, n)
		default:
			ts.Version, ts.Files, ts.Records = snap.Version, len(snap.Files), numRecords(snap)
			if txn, ok := snap.Txns[appID]; ok {
				ts.TxnVersion = lsnString(txn.Version)
			}
		}
		st, _, err := relay.ReadRebuildState(ctx, store, n)
		if err != nil {
			return nil, err
		}
		if st.Paused != "" {
			ts.Problem = fmt.Sprintf("paused for rebuild %s since %s (slot held there)", st.Paused, st.PausedAt)
		}
		out = append(out, ts)
	}
	return out, nil
}

func lsnString(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }

func printStatus(env *cliEnv, rep statusReport) {
	s := rep.Slot
	if !s.Exists {
		fmt.Fprintf(env.stdout, "slot %s: does not exist (first start creates it; `relay run`)\n", s.Name)
	} else {
		active := "inactive"
		if s.ActivePID != nil {
			active = fmt.Sprintf("active (pid %d)", *s.ActivePID)
		}
		headroom := "unlimited (max_slot_wal_keep_size = -1)"
		if s.SafeWALSize != nil {
			headroom = fmt.Sprintf("%.1f MiB before PostgreSQL invalidates the slot", float64(*s.SafeWALSize)/(1<<20))
		}
		fmt.Fprintf(env.stdout, "slot %s: %s, wal_status=%s, confirmed=%s, current WAL=%s\n", s.Name, active, s.WALStatus, s.ConfirmedLSN, rep.WALLSN)
		fmt.Fprintf(env.stdout, "  WAL held back: %.1f MiB; headroom: %s\n", float64(s.RetainedBytes)/(1<<20), headroom)
	}
	if len(rep.Topics) == 0 {
		return
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tVERSION\tTXN LSN\tFILES\tRECORDS\tPROBLEM")
	for _, t := range rep.Topics {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", t.Topic, t.Version, t.TxnVersion, t.Files, t.Records, t.Problem)
	}
	_ = tw.Flush()
}
