package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// Protection is an operator's promise to a group: maintenance (log
// clean-up and VACUUM, package maintain) keeps every version of the table
// from the group's position on, whatever the table's retention, for up
// to MaxHold past the moment it first had to; then it releases the group,
// with an error in its log, and deletes as the retention says. Kept at
// catalog.KindMemberProtect.
type Protection struct {
	MaxHold time.Duration
	SetAt   time.Time
}

// Hold is maintenance's record of keeping a protected group's versions:
// since when, from which version, and when it released the group (zero
// while it holds). Kept at catalog.KindMemberHold, written by maintenance
// only.
type Hold struct {
	Since    time.Time `json:"since"`
	Version  int64     `json:"version"`
	Released time.Time `json:"released,omitzero"`
}

type protectJSON struct {
	Group          string    `json:"group"`
	Topic          string    `json:"topic"`
	MaxHoldSeconds float64   `json:"max_hold_seconds"`
	SetAt          time.Time `json:"set_at"`
}

// Protect protects group in topic for at most maxHold (see Protection),
// and arms it again if maintenance released it. The group need not exist
// yet.
func Protect(ctx context.Context, store storage.Store, group, topic string, maxHold time.Duration) error {
	if err := checkNames(group, topic); err != nil {
		return err
	}
	if maxHold <= 0 {
		return badRequest("the maximum hold is %s: give a positive duration, e.g. 168h", maxHold)
	}
	key, _ := catalog.Key(catalog.KindMemberProtect, group, topic)
	data, err := json.Marshal(protectJSON{Group: group, Topic: topic, MaxHoldSeconds: maxHold.Seconds(), SetAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := store.Put(ctx, key, data); err != nil {
		return fmt.Errorf("protect group %q in topic %q: %w", group, topic, err)
	}
	return WriteHold(ctx, store, group, topic, nil)
}

// Unprotect ends the protection: maintenance deletes as the retention says.
func Unprotect(ctx context.Context, store storage.Store, group, topic string) error {
	if err := checkNames(group, topic); err != nil {
		return err
	}
	key, _ := catalog.Key(catalog.KindMemberProtect, group, topic)
	if err := store.Delete(ctx, key); err != nil {
		return fmt.Errorf("unprotect group %q in topic %q: %w", group, topic, err)
	}
	return WriteHold(ctx, store, group, topic, nil)
}

// WriteHold records maintenance's hold of a group (nil deletes it).
func WriteHold(ctx context.Context, store storage.Store, group, topic string, h *Hold) error {
	key, err := catalog.Key(catalog.KindMemberHold, group, topic)
	if err != nil {
		return err
	}
	if h == nil {
		return store.Delete(ctx, key)
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return store.Put(ctx, key, data)
}

// Stored is a group as the store holds it: its state's summary, and its
// protection and hold when it has them.
type Stored struct {
	Group, Topic string
	Exists       bool // the group has a log (it was created)
	Epoch        int64
	TableID      string
	Position     Position // everything before it is acknowledged
	InFlight     int      // events leased now
	Unacked      int      // events handed out and not acknowledged, leased or not
	Members      []string // members holding leases now
	Delivered    int64
	Redelivered  int64
	Acked        int64
	Protection   *Protection
	Hold         *Hold
	// View is what the server that wrote the newest snapshot saw then
	// (members, waits, the oldest event not acknowledged and its key,
	// throughput); nil before the first snapshot.
	View *View
	// Err says why the group's state, protection or hold could not be
	// read; the rest is then partial.
	Err error
}

// List reads every group of the store that has a log, a protection or a
// hold, sorted by group and topic.
func List(ctx context.Context, store storage.Store) ([]Stored, error) {
	objs, err := store.List(ctx, catalog.MembersPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("list members groups in %s: %w", store, err)
	}
	var out []Stored
	idx := map[groupKey]int{}
	for _, o := range objs {
		kind, names, ok := catalog.Parse(o.Key)
		if !ok {
			continue
		}
		k := groupKey{names[0], names[1]}
		i, seen := idx[k]
		if !seen {
			i = len(out)
			idx[k] = i
			out = append(out, Stored{Group: k.group, Topic: k.topic})
		}
		switch kind {
		case catalog.KindMemberProtect:
			out[i].Protection, err = readProtection(ctx, store, o.Key, k)
		case catalog.KindMemberHold:
			out[i].Hold, err = readHold(ctx, store, o.Key)
		case catalog.KindMemberEntry, catalog.KindMemberSnapshot:
			out[i].Exists = true
		}
		if err != nil && out[i].Err == nil {
			out[i].Err = err
		}
	}
	now := time.Now()
	for i := range out {
		if out[i].Exists && out[i].Err == nil {
			out[i].Err = out[i].load(ctx, store, now)
		}
	}
	return out, nil
}

func (s *Stored) load(ctx context.Context, store storage.Store, now time.Time) error {
	lg, err := newGroupLog(store, s.Group, s.Topic)
	if err != nil {
		return err
	}
	st, _, err := lg.load(ctx)
	if err != nil {
		return fmt.Errorf("read group %q topic %q: %w", s.Group, s.Topic, err)
	}
	s.Epoch, s.TableID, s.Position, s.View = st.Epoch, st.TableID, st.Low, st.view
	s.Delivered, s.Redelivered, s.Acked = st.Delivered, st.Redelivered, st.Acked
	seen := map[string]bool{}
	for _, f := range st.flight {
		s.Unacked++
		if f.leased(now) {
			s.InFlight++
			if !seen[f.Member] {
				seen[f.Member] = true
				s.Members = append(s.Members, f.Member)
			}
		}
	}
	return nil
}

func readProtection(ctx context.Context, store storage.Store, key string, k groupKey) (*Protection, error) {
	data, err := store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j protectJSON
	if err := json.Unmarshal(data, &j); err != nil || j.Group != k.group || j.Topic != k.topic || j.MaxHoldSeconds <= 0 {
		return nil, fmt.Errorf("%s in %s is damaged: protect the group again (relay members protect)", key, store)
	}
	return &Protection{MaxHold: time.Duration(j.MaxHoldSeconds * float64(time.Second)), SetAt: j.SetAt}, nil
}

func readHold(ctx context.Context, store storage.Store, key string) (*Hold, error) {
	data, err := store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h Hold
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%s in %s is damaged (%v): protect the group again to start its hold afresh", key, store, err)
	}
	return &h, nil
}

// ProtectionText says a group's protection and hold in a few words, for
// tables and pages: "-", "up to 168h", "holding since ... (up to 168h)",
// "released ...".
func (s *Stored) ProtectionText(now time.Time) string {
	switch {
	case s.Protection == nil:
		return "-"
	case s.Hold == nil:
		return "up to " + s.Protection.MaxHold.String()
	case !s.Hold.Released.IsZero():
		return fmt.Sprintf("RELEASED %s after holding from version %d since %s", s.Hold.Released.UTC().Format(time.RFC3339),
			s.Hold.Version, s.Hold.Since.UTC().Format(time.RFC3339))
	}
	left := s.Hold.Since.Add(s.Protection.MaxHold).Sub(now).Round(time.Second)
	return strings.TrimSpace(fmt.Sprintf("holding version %d for %s (released in %s)", s.Hold.Version,
		now.Sub(s.Hold.Since).Round(time.Second), max(left, 0)))
}
