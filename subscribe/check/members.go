package check

import (
	"context"
	"strings"
	"time"

	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// MembersInfo is what a row of a group served to parallel members (relay
// serve, package subscribe/members) adds: its events in flight, and who
// holds the table's retention for how long.
type MembersInfo struct {
	InFlight    int      `json:"in_flight"` // leased now
	Unacked     int      `json:"unacked"`   // handed out, not acknowledged
	Members     []string `json:"members"`   // holding leases now
	Redelivered int64    `json:"redelivered"`
	// Protection: "-" (retention does not wait), or the maximum hold, the
	// hold maintenance keeps and since when, or the release.
	Protection     string     `json:"protection"`
	MaxHoldSeconds float64    `json:"max_hold_seconds,omitempty"`
	HoldingSince   *time.Time `json:"holding_since,omitempty"`
	HeldVersion    int64      `json:"held_version,omitempty"`
	Released       *time.Time `json:"released,omitempty"`
	// Live is what the server that last wrote the group's snapshot saw
	// (at most about 30 s old while the group is busy): its members, the
	// events waiting behind an earlier one of their key, the oldest event
	// not acknowledged and its key (the key holding the group back), and
	// the acknowledgements per second.
	Live *members.View `json:"live,omitempty"`
}

// membersSources lists the store's members groups as rows to check: their
// position is their log's Low.
func membersSources(ctx context.Context, cfg Config) ([]source, error) {
	list, err := members.List(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	var out []source
	for i := range list {
		s := &list[i]
		if !s.Exists && s.Err == nil {
			continue
		}
		out = append(out, source{cp: subscribe.Checkpoint{Group: s.Group, Topic: s.Topic, Position: s.Position, TableID: s.TableID},
			name: "members", members: s})
	}
	return out, nil
}

// membersRow fills a members group's part of its row: while maintenance
// holds the table for it, its headroom is the time left before the
// release; a protected group not holding yet has the maximum hold on top
// of the retention's.
func membersRow(r *Row, s *members.Stored, now time.Time) {
	m := &MembersInfo{InFlight: s.InFlight, Unacked: s.Unacked, Members: s.Members, Redelivered: s.Redelivered,
		Protection: s.ProtectionText(now), Live: s.View}
	if m.Members == nil {
		m.Members = []string{}
	}
	if p := s.Protection; p != nil {
		m.MaxHoldSeconds = p.MaxHold.Seconds()
		switch h := s.Hold; {
		case h != nil && !h.Released.IsZero():
			m.Released, m.HeldVersion = &h.Released, h.Version
		case h != nil:
			since := h.Since
			m.HoldingSince, m.HeldVersion = &since, h.Version
			r.HeadroomSeconds = max(h.Since.Add(p.MaxHold).Sub(now).Seconds(), 0)
		case r.HeadroomVersions >= 0:
			r.HeadroomSeconds += p.MaxHold.Seconds()
		}
	}
	r.Members = m
	if s.Err != nil {
		r.Error = s.Err.Error()
	}
}

// membersBreaches: a released group is a breach.
func membersBreaches(r Row) []string {
	if r.Members == nil || r.Members.Released == nil {
		return nil
	}
	return []string{"released past its maximum hold at " + r.Members.Released.UTC().Format(time.RFC3339) +
		": maintenance deleted what it had not acknowledged; " + strings.TrimSpace("reset the group")}
}
