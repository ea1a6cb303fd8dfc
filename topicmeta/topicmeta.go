// Package topicmeta describes topics for the people who find and own them:
// what `relay topics` prints, the operator's page shows and `relay catalog
// sync` registers in Unity Catalog. A topic's Info joins what the operator
// said (owner, description: catalog.TopicMeta, set by `relay topics
// describe`), what its Delta table says (version, records, last commit,
// retention, columns, and the relays whose txn it holds, with their
// markers: its sources) and what other features know about it (contract
// versions and personal columns), which they add through a Provider.
//
// Apply writes the description and column comments into the table's own
// metaData (metaData.description, and "comment" in each field's metadata)
// so that every Delta reader sees them. That commit changes no column's
// structure, which is exactly what a live relay's writer accepts from
// another writer (sink/delta's SameSchema leaves comments out): the relay
// streams on through it.
//
// A topic of a topic group (catalog.Group) shares its group's table, so
// what is the topic's own is kept apart from what is the table's:
//   - its owner and description stay in the catalog: Apply refuses a
//     grouped topic (ErrShared), and the group table's metaData carries
//     the group's own description (GroupInfo.Description: the group, its
//     topics, how to read one), written by ApplyGroup;
//   - its records and last commit are its own, read from the group
//     table's log without reading a data file: records are exact where
//     the files that may hold it hold only it (Info.SharedRecords counts
//     the rows of files it shares with other topics), the last commit is
//     the newest of its own txns (<appId>/<topic>, catalog.TxnAppID),
//     and its sources are the relays with such a txn;
//   - version, retention and columns are the group table's.
//
// LoadAll reads each table's log once, whatever the number of topics in
// it.
package topicmeta

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// Info is everything known about one topic. Slices a feature has not
// filled are nil, which every view shows as "none".
type Info struct {
	Topic       string    `json:"topic"`
	Owner       string    `json:"owner,omitempty"`
	Description string    `json:"description,omitempty"`
	Described   time.Time `json:"described,omitzero"` // when `relay topics describe` last set them

	// Table is the folder of the topic's table under the store root: its
	// own name, or its group's table (catalog.GroupTable) when Group is
	// set. A topic not registered yet shows where its first event goes.
	Table    string `json:"table"`
	Group    string `json:"group,omitempty"`
	Location string `json:"location"` // the table's URL
	Version  int64  `json:"version"`  // the table's; -1: no table (or, in a group, no event yet)
	// Records are the topic's rows by the files' statistics. In a group's
	// table, the rows of files that hold the topic alone; SharedRecords
	// are the rows of files it shares with other topics of the group and
	// may have rows in: its own among them are not counted (that needs a
	// scan), so its count is between Records and Records+SharedRecords.
	Records       int64 `json:"records"`
	SharedRecords int64 `json:"sharedRecords,omitempty"`
	// LastCommit is the table's last commit; in a group's table, the last
	// commit that recorded the topic's position (its txn's lastUpdated).
	LastCommit    time.Time `json:"lastCommit,omitzero"`
	LogRetention  string    `json:"logRetention,omitempty"`  // delta.logRetentionDuration (or its default)
	FileRetention string    `json:"fileRetention,omitempty"` // delta.deletedFileRetentionDuration (or its default)
	Columns       []Column  `json:"columns,omitempty"`
	Sources       []Source  `json:"sources"`

	// Contracts and PersonalColumns come from the contracts and personal
	// data features (Provider); nil until one fills them.
	Contracts       []Contract       `json:"contracts"`
	PersonalColumns []PersonalColumn `json:"personalColumns"`

	// Problem says why part of the Info could not be read (a missing or
	// unreadable table, a provider's error).
	Problem string `json:"problem,omitempty"`

	schemaString     string  // the table's, for Apply and Unity Catalog
	tableDescription *string // the table's metaData.description
}

// SchemaString is the table's schemaString ("" without a table).
func (in *Info) SchemaString() string { return in.schemaString }

// Column is one column of the topic's table.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // delta.TypeString
	Nullable bool   `json:"nullable"`
	Comment  string `json:"comment,omitempty"`
}

// Source is one relay that commits to the topic: its txn appId in the
// table's log (in a group's table, the appId of its txn <appId>/<topic>),
// with what its marker says about its source database.
type Source struct {
	AppID    string `json:"appId"`
	Slot     string `json:"slot,omitempty"`
	Database string `json:"database,omitempty"`
	SystemID string `json:"systemId,omitempty"`
	TxnLSN   string `json:"txnLsn"` // its last committed source position
}

// Contract is the registered versions of one event type of the topic.
type Contract struct {
	Type          string `json:"type"`
	Versions      []int  `json:"versions"`
	Compatibility string `json:"compatibility,omitempty"`
}

// PersonalColumn is a field a contract marks as personal data. Type ""
// is a whole column of every event: the key of a topic that stores it as
// a keyed hash.
type PersonalColumn struct {
	Type    string `json:"type,omitempty"`
	Version int    `json:"version,omitempty"`
	Column  string `json:"column"`  // the table column holding it, e.g. "payload"
	Pointer string `json:"pointer"` // JSON pointer within it, e.g. "/customer/email"
}

// Provider adds what a feature knows about a topic to its Info: the
// contracts feature fills Contracts, the personal data feature
// PersonalColumns. Describe must only read.
type Provider interface {
	Describe(ctx context.Context, store storage.Store, info *Info) error
}

var (
	providersMu sync.Mutex
	providers   []Provider
)

// Register adds a Provider to every later Load. Features register theirs
// from the command's wiring (cmd/relay), once.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers = append(providers, p)
}

func registered() []Provider {
	providersMu.Lock()
	defer providersMu.Unlock()
	return append([]Provider(nil), providers...)
}

// Shared reports whether the topic lives in a group's table.
func (in *Info) Shared() bool { return in.Group != "" }

// RecordsText is Records as the listings show it: the number, or
// "shared" when part of the topic's rows are in files it shares with
// other topics of its group (counting them needs a scan).
func (in *Info) RecordsText() string {
	if in.SharedRecords > 0 {
		return "shared"
	}
	return strconv.FormatInt(in.Records, 10)
}

// IsDeadLetter reports whether the topic is the dead-letter topic.
func (in *Info) IsDeadLetter() bool { return in.Topic == outbox.DeadLetterTopic }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func lsnString(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }
