package governance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/unitycatalog"
)

// governGroup writes the group's description into its table when the
// topics it holds changed, and registers its table when one of them is
// not registered yet. members are the group's registered topics as the
// registry lists them; the group's table is read only when there is
// something to do.
func (g *Governor) governGroup(ctx context.Context, name string, members []string) {
	g.mu.Lock()
	apply := g.groupsApplied[name] != strings.Join(members, ",")
	g.mu.Unlock()
	register := time.Now().After(g.retryAt) && slices.ContainsFunc(members, g.needsRegistration)
	if !apply && !register {
		return
	}
	gi, topics, ok, err := topicmeta.LoadGroup(ctx, g.cfg.Store, name)
	if err != nil || !ok || gi.Version < 0 {
		return // unreadable, or no table yet: the next round
	}
	if apply && g.applyGroup(ctx, gi) {
		if gi, topics, ok, err = topicmeta.LoadGroup(ctx, g.cfg.Store, name); err != nil || !ok {
			return // register what the table now says, next round
		}
	}
	if register && g.uc != nil && g.ensureSchema(ctx, gi.Topics) {
		created, conflict, err := g.cfg.UC.RegisterGroup(ctx, g.cfg.Target, gi, topics)
		g.registered(ctx, gi.Topics, unitycatalog.TableName(gi.Table), created, conflict, err)
	}
}

// applyGroup writes the group's description and column comments into its
// table and reports whether it committed.
func (g *Governor) applyGroup(ctx context.Context, gi topicmeta.GroupInfo) bool {
	v, changed, err := topicmeta.ApplyGroup(ctx, g.cfg.Store, gi)
	switch {
	case errors.Is(err, topicmeta.ErrNoTable):
		return false
	case err != nil:
		if ctx.Err() == nil {
			g.cfg.Log.Warn("governance: cannot write the group's description and column comments into its table; trying again later", "group", gi.Group, "err", err)
		}
		return false
	case changed:
		g.cfg.Log.Info("governance: group table carries the group's description and column comments", "group", gi.Group, "topics", len(gi.Topics), "version", v)
	}
	g.mu.Lock()
	g.groupsApplied[gi.Group] = strings.Join(gi.Topics, ",")
	g.mu.Unlock()
	return changed
}
