package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Group is a topic group: low-rate topics whose events share one Delta
// table, so that one commit serves them all and the store's requests do
// not grow with the number of topics (issue 30; DESIGN.md, "Topic
// groups"). A topic joins the first group, in name order, one of whose
// patterns matches its name (path.Match: '*' any run of characters, '?'
// one, '[a-z]' a class), when its first event is committed; from then on
// its registry entry says where it lives, so later groups never move it.
// Internal topics (names starting with "_") never join a group.
type Group struct {
	Name   string   `json:"group"`
	Topics []string `json:"topics"` // patterns of topic names
	// CommitInterval, when set (a Go duration, "900ms"), is the shortest
	// time between two commits of the group's table by one relay, in
	// place of the relay's --topic-commit-interval: on S3 a commit costs
	// about two PUTs whatever the number of its topics, so the interval
	// sets both the group's request cost and its latency.
	CommitInterval string    `json:"commitInterval,omitempty"`
	Created        time.Time `json:"created"`
}

// MaxCommitInterval bounds a group's commit interval.
const MaxCommitInterval = time.Hour

// Interval returns the group's commit interval; ok=false when unset.
func (g Group) Interval() (time.Duration, bool) {
	if g.CommitInterval == "" {
		return 0, false
	}
	d, err := time.ParseDuration(g.CommitInterval)
	return d, err == nil
}

// GroupTablePrefix begins the folder of every group's table: no topic
// name starts with "_", so no topic table can be one.
const GroupTablePrefix = "_group."

// MaxGroupNameLen keeps a group's table name within a catalog name.
const MaxGroupNameLen = 120

// GroupTable returns the folder, under the store root, of group g's table.
func GroupTable(g string) string { return GroupTablePrefix + g }

// GroupOfTable returns the group whose table is table, ok=false when
// table is a topic's own table.
func GroupOfTable(table string) (string, bool) {
	return strings.CutPrefix(table, GroupTablePrefix)
}

// Check reports whether the group can be stored: a name of the topic rule
// (no leading "_"), and 1-64 valid patterns.
func (g Group) Check() error {
	if err := CheckName("group", g.Name); err != nil {
		return err
	}
	if strings.HasPrefix(g.Name, "_") || len(g.Name) > MaxGroupNameLen {
		return fmt.Errorf("group name %q is invalid: start with a letter or digit, at most %d characters", truncate(g.Name), MaxGroupNameLen)
	}
	if len(g.Topics) == 0 || len(g.Topics) > 64 {
		return fmt.Errorf("group %q: give 1-64 topic patterns (e.g. --topics 'metrics.*')", g.Name)
	}
	for _, p := range g.Topics {
		if err := checkPattern(p); err != nil {
			return fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	if g.CommitInterval != "" {
		d, err := time.ParseDuration(g.CommitInterval)
		if err != nil || d < 0 || d > MaxCommitInterval {
			return fmt.Errorf("group %q: commit interval %q is invalid: give a duration from 0s to 1h, e.g. 900ms", g.Name, truncate(g.CommitInterval))
		}
	}
	return nil
}

func checkPattern(p string) error {
	if p == "" || len(p) > 256 || strings.ContainsAny(p, "/\\") || strings.HasPrefix(p, "_") {
		return fmt.Errorf("topic pattern %q is invalid: use topic-name characters with '*', '?' or '[...]', not starting with '_'", truncate(p))
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("topic pattern %q is invalid: %w", truncate(p), err)
	}
	return nil
}

// internal reports whether topic is one of DeltaBus's own (_dead_letter):
// it always has its own table.
func internal(topic string) bool { return strings.HasPrefix(topic, "_") }

// Matches reports whether the topic is one of the group's.
func (g Group) Matches(topic string) bool {
	if internal(topic) {
		return false
	}
	for _, p := range g.Topics {
		if ok, _ := path.Match(p, topic); ok {
			return true
		}
	}
	return false
}

// WriteGroup stores a new group, with the store's conditional write: of
// two creators of one name at once exactly one writes, and the other
// reads what won. A group of the same name with the same patterns and
// commit interval is left as it is (a retry, or the same definition twice);
// with others it is an error naming what is there: topics already placed
// by it would not move, so a changed pattern would say something untrue of
// them.
func WriteGroup(ctx context.Context, store storage.Store, g Group) error {
	if err := g.Check(); err != nil {
		return err
	}
	key, err := Key(KindGroup, g.Name)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	err = store.PutIfAbsent(ctx, key, append(b, '\n'))
	if err == nil {
		return nil
	}
	if !errors.Is(err, storage.ErrExists) {
		return fmt.Errorf("write %s: %w", key, err)
	}
	old, ok, err := ReadGroup(ctx, store, g.Name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("group %q: %s exists but cannot be read back; try again", g.Name, key)
	}
	if strings.Join(old.Topics, "\x00") == strings.Join(g.Topics, "\x00") && old.CommitInterval == g.CommitInterval {
		return nil
	}
	return fmt.Errorf("group %q exists with topics %s (commit interval %q); a group's definition is fixed once created: create another group for other topics",
		g.Name, strings.Join(old.Topics, ","), old.CommitInterval)
}

// ReadGroup reads one group; ok=false when absent.
func ReadGroup(ctx context.Context, store storage.Store, name string) (Group, bool, error) {
	var g Group
	ok, err := readJSON(ctx, store, &g, KindGroup, name)
	if ok && (g.Name != name || g.Check() != nil) {
		return Group{}, false, fmt.Errorf("group %q in %s is corrupt: its definition does not check", name, store)
	}
	return g, ok, err
}

// ListGroups returns every group, in name order.
func ListGroups(ctx context.Context, store storage.Store) ([]Group, error) {
	dir := Prefix + "groups/"
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list groups in %s: %w", store, err)
	}
	var out []Group
	for _, o := range objs {
		kind, names, ok := Parse(o.Key)
		if !ok || kind != KindGroup {
			continue
		}
		g, found, err := ReadGroup(ctx, store, names[0])
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// MatchGroup returns the first group, in name order, that matches topic;
// ok=false when none does.
func MatchGroup(groups []Group, topic string) (Group, bool) {
	for _, g := range groups {
		if g.Matches(topic) {
			return g, true
		}
	}
	return Group{}, false
}

// ErrPlacementRace: two writers placed a new topic in different tables at
// once (a group was created between their readings); the loser re-reads.
var ErrPlacementRace = errors.New("catalog: the topic was placed in another table concurrently")
