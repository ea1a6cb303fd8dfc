// Package statuspage is the operator's page: `relay run` serves it at "/"
// on its metrics address, and the same data as JSON at /api/status. One
// HTML page rendered by the relay (html/template, embedded, no build
// step, nothing fetched from elsewhere) that refreshes itself: the slot
// (lag, WAL headroom, holder), each source relay writing into the store
// (their catalog markers), each topic (events, Delta version, age of the
// last commit, held or not and why, owner, contracts, personal columns),
// one row per consumer group and topic (lag in versions and seconds,
// retention headroom, and for materialising groups completeness and
// duplicate rate), the last reconcile verdict per topic, dead letters by
// reason in the last hour, and Unity Catalog registration.
//
// Nothing on it is a secret: no DSN, password, token or key, no event
// payload, no raw dead-letter row (reasons only, which name columns and
// topics, never values). Everything is read when the page or the API is
// asked, at most once per Config.Refresh (consumer checks once per six),
// so a page nobody looks at costs the store nothing.
package statuspage

import (
	"github.com/deltabus/deltabus/subscribe/check"
	"time"

	"github.com/deltabus/deltabus/governance"
	"github.com/deltabus/deltabus/reconcile"
)

// Status is /api/status.
type Status struct {
	GeneratedAt time.Time `json:"generatedAt"`
	Relay       Relay     `json:"relay"`
	Slot        *Slot     `json:"slot,omitempty"`
	Sources     []Source  `json:"sources"`
	// Failovers are the sources' recorded forks of their timelines, with
	// the events published from an abandoned timeline (catalog.Fork).
	Failovers    []Failover            `json:"failovers"`
	Topics       []Topic               `json:"topics"`
	Consumers    []Consumer            `json:"consumers"`
	Reconcile    []reconcile.TopicLast `json:"reconcile"`
	DeadLetters  DeadLetters           `json:"deadLetters"`
	UnityCatalog *governance.UCStatus  `json:"unityCatalog,omitempty"`
	// Errors are the parts that could not be read this time.
	Errors []string `json:"errors,omitempty"`

	// Republished are the newest dead-letter redrives and reconcile
	// repairs (relay deadletter redrive, relay reconcile --repair).
	Republished []Run `json:"republished"`
}

// Relay is the relay serving the page.
type Relay struct {
	AppID   string `json:"appId"`
	Slot    string `json:"slot"`
	Store   string `json:"store"`
	Version string `json:"version"`
	Ready   bool   `json:"ready"`
	Why     string `json:"why"`
}

// Slot is the replication slot as PostgreSQL reports it.
type Slot struct {
	Name       string    `json:"name"`
	Exists     bool      `json:"exists"`
	Active     bool      `json:"active"`
	Holder     string    `json:"holder,omitempty"`
	WALStatus  string    `json:"walStatus,omitempty"`
	Confirmed  string    `json:"confirmedLsn,omitempty"`
	CurrentWAL string    `json:"currentWalLsn,omitempty"`
	LagBytes   int64     `json:"lagBytes"`                // current WAL - confirmed: what the relay has not acknowledged
	Retained   int64     `json:"retainedBytes"`           // current WAL - restart: WAL the slot keeps on disk
	Headroom   *int64    `json:"headroomBytes,omitempty"` // safe_wal_size; nil: unlimited
	ReadAt     time.Time `json:"readAt"`
	Error      string    `json:"error,omitempty"`
}

// Source is one relay that started on the store (its marker).
type Source struct {
	AppID           string    `json:"appId"`
	Slot            string    `json:"slot"`
	Database        string    `json:"database"`
	SystemID        string    `json:"systemId"`
	ConsistentPoint string    `json:"consistentPoint"`
	Since           time.Time `json:"since"`
	This            bool      `json:"this"`               // the relay serving the page
	Timeline        uint32    `json:"timeline,omitempty"` // the timeline its progress is on
}

// Failover is one fork of a source's timelines: a promotion (or a
// point-in-time recovery) the relay followed. Phantoms are the events the
// old timeline published past the fork, lost with the old primary; they
// stay in their topics.
type Failover struct {
	AppID        string          `json:"appId"`
	FromTimeline uint32          `json:"fromTimeline"`
	ToTimeline   uint32          `json:"toTimeline"`
	ForkLSN      string          `json:"forkLsn"`
	DetectedAt   time.Time       `json:"detectedAt"`
	Phantoms     int             `json:"phantoms"`
	Topics       []FailoverTopic `json:"topics,omitempty"`
}

// FailoverTopic is one topic's phantoms of a fork.
type FailoverTopic struct {
	Topic    string   `json:"topic"`
	Count    int      `json:"count"`
	FirstLSN string   `json:"firstLsn"`
	LastLSN  string   `json:"lastLsn"`
	IDs      []string `json:"ids"` // the first few; relay reconcile and the fork record list every one
}

// Topic is one topic's row. A topic of a topic group (Group set) shares
// its group's table: Version is the table's, Events, LastCommit and
// Position are the topic's own (topicmeta.Info).
type Topic struct {
	Topic       string `json:"topic"`
	Group       string `json:"group,omitempty"`
	Table       string `json:"table"`
	Owner       string `json:"owner"`
	Description string `json:"description"`
	// Events are the topic's rows by the files' statistics; SharedEvents,
	// of a grouped topic, the rows of files it shares with other topics
	// of its group (its own among them are not counted): the page shows
	// "shared".
	Events       int64 `json:"events"`
	SharedEvents int64 `json:"sharedEvents,omitempty"`
	Version      int64 `json:"version"`
	// Position is the source position this relay last committed for the
	// topic: its txn in the topic's table (appId, or appId/topic in a
	// group's table).
	Position   string    `json:"position,omitempty"`
	LastCommit time.Time `json:"lastCommit,omitzero"`
	AgeSeconds *float64  `json:"ageSeconds,omitempty"`
	Held       bool      `json:"held"`
	HeldWhy    string    `json:"heldWhy,omitempty"`
	HeldSince  string    `json:"heldSince,omitempty"`
	Contracts  string    `json:"contracts"`
	Personal   string    `json:"personalColumns"`
	Problem    string    `json:"problem,omitempty"`
}

// Consumer is one (group, topic) row of `relay check consumers`.
type Consumer struct {
	Group            string   `json:"group"`
	Topic            string   `json:"topic"`
	Checkpoints      string   `json:"checkpoints"`
	LagVersions      int64    `json:"lagVersions"`
	LagSeconds       float64  `json:"lagSeconds"`
	HeadroomVersions int64    `json:"headroomVersions"`
	HeadroomSeconds  float64  `json:"headroomSeconds"`
	Completeness     *float64 `json:"completeness,omitempty"`
	DuplicateRate    *float64 `json:"duplicateRate,omitempty"`
	Breaches         []string `json:"breaches,omitempty"`
	Error            string   `json:"error,omitempty"`
	// Members is set for a group served to parallel members (relay
	// serve): events in flight, members, the oldest event not
	// acknowledged and its key, throughput, and the retention it holds.
	Members *check.MembersInfo `json:"members,omitempty"`
}

// DeadLetters counts the dead letters committed since Since, by reason.
type DeadLetters struct {
	Since    time.Time     `json:"since"`
	Total    int64         `json:"total"`
	ByReason []ReasonCount `json:"byReason"`
}

// ReasonCount is one reason with its quoted parts left out (so rows that
// differ only by a topic name or a value count together, and no value a
// producer wrote reaches the page).
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}
