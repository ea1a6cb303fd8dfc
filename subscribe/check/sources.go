package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/deltabus/deltabus/catalog"
)

// SourceRead is how far a group has read one source's events in a shared
// topic: the source's newest WAL position (the Delta txn version of its
// appId) in the versions the group has consumed, against the newest in the
// table. Several source databases write one topic each under their own
// appId; a row's single version lag cannot say which of them the group is
// behind on, this can.
type SourceRead struct {
	AppID    string `json:"app_id"`
	Database string `json:"database,omitempty"` // from the source's marker, when the store holds it
	Read     string `json:"read"`               // LSN the group has read up to; "" for none of this source's events
	Latest   string `json:"latest"`             // LSN of the source's newest commit in the table
	// LagBytes is the source's WAL between Read and Latest (its whole
	// position when Read is ""): 0 when the group has read all of it.
	LagBytes int64 `json:"lag_bytes"`
}

// sourceReads fills r.Sources: the txns of the snapshot at the group's last
// consumed version against the table's newest snapshot. One snapshot load
// per distinct position, shared by the table's groups. In a group's
// table a source's position in the topic is its txn of appId
// "<appId>/<topic>" (catalog.TxnAppID); the other topics' are not the
// group's concern.
func (ts *topicState) sourceReads(ctx context.Context, r *Row, databases map[string]string) error {
	read, ok, err := ts.txnsRead(ctx, r.Version)
	if err != nil || !ok {
		// Retention passed the group's position: what it read of each
		// source is gone with the log; the row's breach says so.
		return err
	}
	for _, app := range slices.Sorted(maps.Keys(ts.snap.Txns)) {
		src, mine := ts.source(app)
		if !mine || catalog.IsRepublishTxn(app) { // a redrive's or repair's counter, no source's position
			continue
		}
		latest := ts.snap.Txns[app].Version
		s := SourceRead{AppID: src, Database: databases[src], Latest: lsnString(latest), LagBytes: latest}
		if t, ok := read[app]; ok {
			s.Read, s.LagBytes = lsnString(t.Version), max(0, latest-t.Version)
		}
		r.Sources = append(r.Sources, s)
	}
	return nil
}

func lsnString(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }

// sourcesText is the SOURCES column: per source, its app id (database),
// the LSN read up to and its latest, and the lag when there is one.
func sourcesText(ss []SourceRead) string {
	if len(ss) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(ss))
	for _, s := range ss {
		name := s.AppID
		if s.Database != "" {
			name += " (" + s.Database + ")"
		}
		read := s.Read
		if read == "" {
			read = "none"
		}
		p := fmt.Sprintf("%s read %s latest %s", name, read, s.Latest)
		if s.LagBytes > 0 {
			p += fmt.Sprintf(" behind %d B", s.LagBytes)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
