package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/governance"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/statuspage"
	"github.com/deltabus/deltabus/storage"
)

// statusReport is `relay status --json`. Like every JSON the CLI prints,
// its field names are camelCase and its LSNs text ("0/16B3748").
type statusReport struct {
	Source *sourceStatus `json:"source,omitempty"`
	Slot   pgsource.Slot `json:"slot"`
	WALLSN string        `json:"currentWalLsn"`
	// StreamAge is how long ago the relay on --relay-addr last received a
	// message on its replication stream for the slot; absent when no
	// relay answers there.
	StreamAge *float64      `json:"relayStreamMessageAgeSeconds,omitempty"`
	Topics    []topicStatus `json:"topics"`
	// Groups are the store's topic groups, each table read once.
	Groups []groupStatus  `json:"groups,omitempty"`
	Others []sourceStatus `json:"otherSources,omitempty"`
	// Failovers are this source's recorded forks and their phantoms.
	Failovers []statuspage.Failover `json:"failovers,omitempty"`
	// Resolved is the source's resolved position: consistent cuts across
	// topics read up to it (absent before its relay published one).
	Resolved *catalog.Resolved `json:"resolved,omitempty"`
	// UnityCatalog is what this source's relay last recorded of its
	// registrations (absent when it registers none).
	UnityCatalog *governance.UCStatus `json:"unityCatalog,omitempty"`
}

// sourceStatus names a source whose relay keeps progress in the store.
type sourceStatus struct {
	AppID    string `json:"appId"`
	SystemID string `json:"systemId,omitempty"`
	Database string `json:"database,omitempty"`
	Slot     string `json:"slot,omitempty"`
	// Adopted: the progress of an earlier release's relay on this source,
	// kept under its legacy appId.
	Adopted bool `json:"adopted,omitempty"`
	// Timeline is the server's timeline; MarkerTimeline the one the
	// relay's progress is on (they differ until the relay follows a
	// promotion).
	Timeline       uint32 `json:"timeline,omitempty"`
	MarkerTimeline uint32 `json:"markerTimeline,omitempty"`
}

func cmdStatus(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "status", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	relayAddr := fs.String("relay-addr", envOr(env, "DELTABUS_METRICS_ADDR", "127.0.0.1:9464"), "also ask the relay serving /metrics here how long ago its replication stream last delivered a message (env DELTABUS_METRICS_ADDR; empty: do not ask)")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	if err := sf.requireSource(); err != nil {
		return fail(env, exitUsage, err)
	}
	// The database part has one deadline: a dead host fails the command
	// with one line within it, never hangs it.
	cctx, cancel := context.WithTimeout(ctx, pgsource.QueryTimeout)
	defer cancel()
	conn, err := pgsource.ConnectBounded(cctx, sf.source, pgsource.QueryTimeout)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	defer conn.Close(cctx)
	var rep statusReport
	if rep.Slot, err = pgsource.ReadSlot(cctx, conn, sf.slot); err != nil {
		return fail(env, exitFailure, fmt.Errorf("PostgreSQL at %s: %s", pgsource.Describe(sf.source), pgsource.RootCause(err)))
	}
	if err := conn.QueryRow(cctx, "SELECT pg_current_wal_lsn()::text").Scan(&rep.WALLSN); err != nil {
		return fail(env, exitFailure, fmt.Errorf("PostgreSQL at %s: %s", pgsource.Describe(sf.source), pgsource.RootCause(err)))
	}
	if *relayAddr != "" && rep.Slot.ActivePID != nil {
		if age, ok := relayStreamAge(ctx, *relayAddr, sf.slot, time.Second); ok {
			v := age.Seconds()
			rep.StreamAge = &v
		}
	}
	if sf.store != "" {
		store, err := daemon.OpenStore(ctx, sf.store, storage.S3Options{})
		if err != nil {
			return fail(env, exitUsage, err)
		}
		src, err := pgsource.Identify(cctx, conn, sf.slot)
		if err != nil {
			return fail(env, exitFailure, err)
		}
		id, err := catalog.ResolveAppID(cctx, store, src.Source, sf.appID)
		if err != nil {
			return fail(env, exitFailure, err)
		}
		rep.Source = &sourceStatus{AppID: id.AppID, SystemID: src.SystemID, Database: src.Database, Slot: src.Slot, Adopted: id.Adopted,
			Timeline: src.Timeline}
		if rep.Topics, rep.Groups, err = topicStatuses(ctx, store, id.AppID); err != nil {
			return fail(env, exitFailure, err)
		}
		if err := sourceTimeline(ctx, store, id, &rep); err != nil {
			return fail(env, exitFailure, err)
		}
		if rep.Others, err = otherSources(ctx, store, id.AppID); err != nil {
			return fail(env, exitFailure, err)
		}
		if st, ok, err := governance.ReadStatus(ctx, store, id.AppID); err != nil {
			return fail(env, exitFailure, err)
		} else if ok {
			rep.UnityCatalog = &st
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

// sourceTimeline adds what the marker and the fork records say of the
// source's timelines: the timeline its progress is on, its failovers, and
// each topic's position as a commit LSN of the current timeline.
func sourceTimeline(ctx context.Context, store storage.Store, id catalog.Identity, rep *statusReport) error {
	if id.Marker == nil {
		return nil
	}
	rep.Source.MarkerTimeline = id.Marker.Timeline
	pos, err := id.Marker.Positions()
	if err != nil {
		return err
	}
	if !pos.Identity() {
		for i := range rep.Topics {
			if t := &rep.Topics[i]; t.TxnVersion != "" {
				t.TxnVersion = lsnString(max(pos.Through(t.position), 0))
			}
		}
	}
	if r, ok, err := catalog.ReadResolved(ctx, store, id.AppID); err != nil {
		return err
	} else if ok {
		rep.Resolved = &r
	}
	forks, err := catalog.ListForks(ctx, store)
	if err != nil {
		return err
	}
	for _, f := range statuspage.Failovers(forks) {
		if f.AppID == id.AppID {
			rep.Failovers = append(rep.Failovers, f)
		}
	}
	return nil
}

// otherSources lists the other relays whose markers the store holds: the
// sources that share its topics.
func otherSources(ctx context.Context, store storage.Store, appID string) ([]sourceStatus, error) {
	markers, err := catalog.ListMarkers(ctx, store)
	if err != nil {
		return nil, err
	}
	var out []sourceStatus
	for _, m := range markers {
		if m.AppID != appID {
			out = append(out, sourceStatus{AppID: m.AppID, SystemID: m.SystemID, Database: m.Database, Slot: m.Slot})
		}
	}
	return out, nil
}

func lsnString(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }

func printStatus(env *cliEnv, rep statusReport) {
	if src := rep.Source; src != nil {
		adopted := ""
		if src.Adopted {
			adopted = " (an earlier release's progress, kept under its legacy appId)"
		}
		fmt.Fprintf(env.stdout, "source: system %s database %q slot %s, appId %s%s\n", src.SystemID, src.Database, src.Slot, src.AppID, adopted)
	}
	for _, o := range rep.Others {
		fmt.Fprintf(env.stdout, "  also in this store: appId %s (system %s database %q slot %s)\n", o.AppID, o.SystemID, o.Database, o.Slot)
	}
	printFailovers(env, rep)
	s := rep.Slot
	if !s.Exists {
		fmt.Fprintf(env.stdout, "slot %s: does not exist (first start creates it; `relay run`)\n", s.Name)
	} else {
		active := "inactive"
		if s.ActivePID != nil {
			active = "active: " + s.HolderText()
		}
		headroom := "unlimited (max_slot_wal_keep_size = -1)"
		if s.SafeWALSize != nil {
			headroom = fmt.Sprintf("%.1f MiB before PostgreSQL invalidates the slot", float64(*s.SafeWALSize)/(1<<20))
		}
		fmt.Fprintf(env.stdout, "slot %s: %s, wal_status=%s, confirmed=%s, current WAL=%s\n", s.Name, active, s.WALStatus, s.ConfirmedLSN, rep.WALLSN)
		fmt.Fprintf(env.stdout, "  WAL held back: %.1f MiB; headroom: %s\n", float64(s.RetainedBytes)/(1<<20), headroom)
		if s.ReplyAge != nil {
			fmt.Fprintf(env.stdout, "  PostgreSQL last heard from the holder %s\n", ageText(*s.ReplyAge))
		}
		if rep.StreamAge != nil {
			fmt.Fprintf(env.stdout, "  the relay last received a message on its replication stream %s\n", ageText(time.Duration(*rep.StreamAge*float64(time.Second))))
		}
	}
	if uc := rep.UnityCatalog; uc != nil {
		state := "registering"
		if !uc.OK && uc.LastError != "" {
			state = fmt.Sprintf("FAILING since %s: %s (retrying; next try %s)", uc.FailedAt.UTC().Format(time.RFC3339), uc.LastError, uc.NextRetry.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(env.stdout, "unity catalog %s -> %s.%s: %s; %d topics registered, %d pending (as of %s)\n", uc.URL, uc.Catalog, uc.Schema, state,
			len(uc.Registered), len(uc.Pending), uc.Updated.UTC().Format(time.RFC3339))
	}
	if len(rep.Topics) > 0 {
		printTopicStatuses(env, rep.Topics, len(rep.Groups) > 0)
	}
	if len(rep.Groups) > 0 {
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTABLE\tTOPICS\tVERSION\tFILES\tRECORDS\tPROBLEM")
		for _, g := range rep.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", g.Group, g.Table, g.Topics, g.Version, g.Files, g.Records, g.Problem)
		}
		_ = tw.Flush()
	}
}

// printTopicStatuses prints a line per topic; with groups, the table that holds
// each ("-" for a topic's own).
func printTopicStatuses(env *cliEnv, topics []topicStatus, groups bool) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	head := "TOPIC\tVERSION\tTXN LSN\tFILES\tRECORDS\tPROBLEM"
	if groups {
		head = "TOPIC\tTABLE\tVERSION\tTXN LSN\tFILES\tRECORDS\tPROBLEM"
	}
	fmt.Fprintln(tw, head)
	for _, t := range topics {
		records := fmt.Sprint(t.Records)
		if t.SharedRecords > 0 {
			records = "shared"
		}
		table := ""
		if groups {
			table = "-\t"
			if t.Table != "" {
				table = t.Table + "\t"
			}
		}
		fmt.Fprintf(tw, "%s\t%s%d\t%s\t%d\t%s\t%s\n", t.Topic, table, t.Version, t.TxnVersion, t.Files, records, t.Problem)
	}
	_ = tw.Flush()
}

// printFailovers says which timeline the source and the relay are on, and
// each failover the relay followed with its phantoms.
func printFailovers(env *cliEnv, rep statusReport) {
	if r := rep.Resolved; r != nil {
		fmt.Fprintf(env.stdout, "  resolved: every transaction of this source below LSN %s (position %d) is whole in its topics (as of %s)\n",
			lsnString(r.LSN), r.Position, r.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if src := rep.Source; src != nil && src.MarkerTimeline != 0 && src.MarkerTimeline != src.Timeline {
		fmt.Fprintf(env.stdout, "  timeline: the source is on %d, the relay's progress on %d: the relay follows the promotion when it next starts\n", src.Timeline, src.MarkerTimeline)
	}
	for _, f := range rep.Failovers {
		fmt.Fprintf(env.stdout, "failover: timeline %d -> %d at %s (found %s): %d phantoms (published from the old timeline, lost with it; `relay reconcile` names them)\n",
			f.FromTimeline, f.ToTimeline, f.ForkLSN, f.DetectedAt.UTC().Format(time.RFC3339), f.Phantoms)
		for _, t := range f.Topics {
			fmt.Fprintf(env.stdout, "  %s: %d phantoms, commit LSNs %s .. %s\n", t.Topic, t.Count, t.FirstLSN, t.LastLSN)
		}
	}
}
