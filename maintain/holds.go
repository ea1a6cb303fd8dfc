package maintain

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// Retention that waits for consumers: a members group protected by its
// operator (members.Protect) keeps every version of its topic's table
// from its position on out of log clean-up (CleanupOptions.KeepFrom) and
// every file removed since that version's commit out of VACUUM
// (KeepRemovedSince), up to its maximum hold counted from the run that
// first had to keep something for it (members.Hold). Past that the group
// is released: an error in the log, deltabus_maintenance_consumer_releases_total,
// and the retention applies again; the group then meets a RetentionError
// when it reads what was deleted. A released group is protected again once
// its position moves past where it was held (it was reset, or caught up),
// or when its operator protects it again. Unprotected groups are not
// waited for.

// protectedGroups reads the protected members groups of the store, by
// topic, once per run.
func protectedGroups(ctx context.Context, root storage.Store) (map[string][]*members.Stored, error) {
	all, err := members.List(ctx, root)
	if err != nil {
		return nil, err
	}
	out := map[string][]*members.Stored{}
	for i := range all {
		// A group whose protection or state cannot be read is taken as
		// protected: its tables are left alone, with the error, until it reads.
		if (all[i].Protection != nil && all[i].Exists) || all[i].Err != nil {
			out[all[i].Topic] = append(out[all[i].Topic], &all[i])
		}
	}
	return out, nil
}

// consumerHold is what a table run keeps for protected groups.
type consumerHold struct {
	keepFrom  int64 // -1: none
	keepSince time.Time
	active    []*members.Stored
}

// holdsFor releases the groups past their maximum hold and returns what
// the others need kept.
func (r tableRun) holdsFor(ctx context.Context, protected map[string][]*members.Stored) (consumerHold, error) {
	h := consumerHold{keepFrom: -1}
	now := r.opts.Now()
	for _, name := range r.t.topics {
		for _, g := range protected[name] {
			if g.Err != nil {
				return h, fmt.Errorf("consumer group %q of topic %q: %w", g.Group, g.Topic, g.Err)
			}
			if g.Hold != nil && !g.Hold.Released.IsZero() {
				if g.Position.Version <= g.Hold.Version {
					continue // released: not waited for
				}
				g.Hold = nil // moved on since: protected again
				if err := r.writeHold(ctx, g); err != nil {
					return h, err
				}
			}
			if g.Hold != nil && now.Sub(g.Hold.Since) > g.Protection.MaxHold {
				g.Hold.Released = now
				if err := r.writeHold(ctx, g); err != nil {
					return h, err
				}
				r.opts.Logger.Error("maintenance released a protected consumer group past its maximum hold: what it has not acknowledged is deleted as the retention says, and the group will need a reset",
					"group", g.Group, "topic", g.Topic, "table", r.t.table, "held_version", g.Hold.Version,
					"holding_since", g.Hold.Since, "max_hold", g.Protection.MaxHold)
				r.tr.Released = append(r.tr.Released, g.Group+"/"+g.Topic)
				continue
			}
			h.active = append(h.active, g)
			if h.keepFrom < 0 || g.Position.Version < h.keepFrom {
				h.keepFrom = g.Position.Version
			}
		}
	}
	if h.keepFrom < 0 {
		return h, nil
	}
	view, err := subscribe.ListLog(ctx, r.table, 0)
	if err != nil {
		return h, err
	}
	v := max(h.keepFrom, view.First)
	if obj, ok := view.Commits[v]; ok {
		t, err := subscribe.VersionTime(ctx, r.table, v, obj.ModTime)
		if err != nil {
			return h, err
		}
		h.keepSince = t.Add(-time.Hour) // writers' clocks may differ from the commit's
	}
	return h, nil
}

// recordHolds notes, after the run's clean-up and VACUUM, which groups
// held something back (the oldest one) and since when; a group that no
// longer holds anything loses its record.
func (r tableRun) recordHolds(ctx context.Context, h consumerHold, heldBack bool) error {
	now := r.opts.Now()
	for _, g := range h.active {
		holding := heldBack && g.Position.Version == h.keepFrom
		switch {
		case holding && g.Hold == nil:
			g.Hold = &members.Hold{Since: now, Version: g.Position.Version}
			r.opts.Logger.Warn("maintenance keeps versions a protected consumer group has not acknowledged",
				"group", g.Group, "topic", g.Topic, "table", r.t.table, "from_version", g.Position.Version, "max_hold", g.Protection.MaxHold)
		case holding && g.Hold.Version != g.Position.Version:
			g.Hold.Version = g.Position.Version
		case holding:
			r.tr.HeldFor = append(r.tr.HeldFor, fmt.Sprintf("%s/%s from version %d since %s", g.Group, g.Topic, g.Hold.Version, g.Hold.Since.UTC().Format(time.RFC3339)))
			continue
		case g.Hold != nil:
			g.Hold = nil
		default:
			continue
		}
		if err := r.writeHold(ctx, g); err != nil {
			return err
		}
		if g.Hold != nil {
			r.tr.HeldFor = append(r.tr.HeldFor, fmt.Sprintf("%s/%s from version %d since %s", g.Group, g.Topic, g.Hold.Version, g.Hold.Since.UTC().Format(time.RFC3339)))
		}
	}
	return nil
}

func (r tableRun) writeHold(ctx context.Context, g *members.Stored) error {
	if r.opts.DryRun {
		return nil
	}
	return members.WriteHold(ctx, r.root, g.Group, g.Topic, g.Hold)
}
