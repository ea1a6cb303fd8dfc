package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Claim is one source's record of its progress in one table (a topic's
// own, or a group's): for each topic, which table (its Delta table id)
// holds the source's events of the topic, and the source's txn version
// that table was seen to hold. It is the source's proof, kept beside the
// table, of what the table must still hold: a source's acknowledged
// events are no longer in the slot once their commit is durable (step 1
// of the exactly-once argument), so a table that lost them, replaced by
// a new one or restored to an older copy, must not be written on as if
// its position were the source's (see "Lost tables" in the package doc).
type Claim struct {
	Table   string              `json:"table"`
	AppID   string              `json:"appId"`
	Topics  map[string]Progress `json:"topics"`
	Updated time.Time           `json:"updated"`
}

// Progress is one topic's entry of a Claim.
type Progress struct {
	// TableID is the Delta table id (metaData.id) of the table that holds
	// the source's events of the topic.
	TableID string `json:"tableId"`
	// Txn is the source's txn version of the topic that table held, at
	// its version Version.
	Txn     int64 `json:"txn"`
	Version int64 `json:"version"`
}

// ReadClaim returns relay appID's claim on table (empty, ok=false, if
// none).
func ReadClaim(ctx context.Context, store storage.Store, appID, table string) (Claim, bool, error) {
	var c Claim
	ok, err := readJSON(ctx, store, &c, KindClaim, table, appID)
	if err != nil {
		return Claim{Table: table, AppID: appID}, false, err
	}
	if !ok || c.Table != table || c.AppID != appID {
		c = Claim{}
		ok = false
	}
	c.Table, c.AppID = table, appID
	if c.Topics == nil {
		c.Topics = map[string]Progress{}
	}
	return c, ok, nil
}

// WriteClaim replaces relay c.AppID's claim on c.Table.
func WriteClaim(ctx context.Context, store storage.Store, c Claim) error {
	c.Updated = time.Now().UTC()
	return writeJSON(ctx, store, c, KindClaim, c.Table, c.AppID)
}

// Lost says why a table found with id tableID, holding the source's txn
// version txn of topic (-1: none), no longer holds the source's claimed
// progress of the topic; "" when it holds it (or nothing is claimed).
// Progress is kept when the table holds the claimed txn or a later one,
// in any table: a source writes a new table only once the loss was
// resolved (its rebuild commits a txn past every position it had, or an
// abort restarts the topic from its hold), and its LSNs only grow.
func (c Claim) Lost(topic, tableID string, txn int64) string {
	p, ok := c.Topics[topic]
	if !ok || txn >= p.Txn {
		return ""
	}
	held := "none of them"
	if txn >= 0 {
		held = fmt.Sprintf("them only up to position %d", txn)
	}
	if p.TableID != tableID {
		return fmt.Sprintf("the table was replaced: table id %s held this source's events of the topic up to position %d; this table (id %s) holds %s",
			p.TableID, p.Txn, tableID, held)
	}
	return fmt.Sprintf("the table went back to an older state (restored from a copy): at version %d it held this source's events of the topic up to position %d; it now holds %s",
		p.Version, p.Txn, held)
}

// Note records that the table with id tableID, at its version version,
// holds the source's txn version txn of topic. It reports whether the
// claim changed. A later position in the same table replaces an earlier
// one; another table replaces the entry only when it holds at least the
// claimed position (Lost says it is not lost).
func (c *Claim) Note(topic, tableID string, txn, version int64) bool {
	if txn < 0 || c.Lost(topic, tableID, txn) != "" {
		return false
	}
	p, ok := c.Topics[topic]
	if ok && p.TableID == tableID && p.Txn >= txn && p.Version >= version {
		return false
	}
	if !ok || p.TableID != tableID {
		p = Progress{TableID: tableID}
	}
	p.Txn, p.Version = max(p.Txn, txn), max(p.Version, version)
	if c.Topics == nil {
		c.Topics = map[string]Progress{}
	}
	c.Topics[topic] = p
	return true
}

// Binds reports whether the claim names tableID as the table of topic.
func (c Claim) Binds(topic, tableID string) bool {
	p, ok := c.Topics[topic]
	return ok && p.TableID == tableID
}
