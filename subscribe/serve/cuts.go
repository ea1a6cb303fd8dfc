package serve

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/subscribe"
)

// A cut (subscribe.ReadCut) over HTTP: GET /v1/cuts?topics=a,b&source=S
// &after=P reads the topics up to the source's resolved position, each
// source transaction whole, each checked against its transaction record.
// It keeps no state: a client keeps the resolved position of the cut it
// handled and asks for the next one after it. Events are as stored
// (personal fields as the relay wrote them) and phantoms are in no cut.

// cutJSON is one cut.
type cutJSON struct {
	Source       string            `json:"source"`
	After        int64             `json:"after"`
	Resolved     int64             `json:"resolved"`
	Transactions []transactionJSON `json:"transactions"`
}

// transactionJSON is one source transaction of a cut.
type transactionJSON struct {
	Source     string                `json:"source"`
	Xid        int64                 `json:"xid"`
	CommitLSN  int64                 `json:"commit_lsn"`
	CommitTime time.Time             `json:"commit_time"`
	Recorded   map[string]int64      `json:"recorded_topics,omitempty"` // its transaction record's counts by topic
	Events     []subscribe.EventJSON `json:"events"`
}

// cuts answers GET /v1/cuts.
func (s *Server) cuts(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	o := subscribe.CutOptions{Source: q.Get("source")}
	for _, t := range strings.Split(q.Get("topics"), ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if err := catalog.CheckName("topic", t); err != nil {
			writeError(w, http.StatusBadRequest, "topics: "+err.Error())
			return
		}
		if c.grant != nil && !matchAny(c.grant.Topics, t) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("token %q is not granted topic %q", c.grant.Name, t))
			return
		}
		o.Topics = append(o.Topics, t)
	}
	if len(o.Topics) == 0 {
		writeError(w, http.StatusBadRequest, "topics is empty: name the topics to read, comma-separated (?topics=orders,payments)")
		return
	}
	if a := q.Get("after"); a != "" {
		var err error
		if o.After, err = strconv.ParseInt(a, 10, 64); err != nil || o.After < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("after %q is not a position: give the resolved position of the previous cut", a))
			return
		}
	}
	if s.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "this server reads no cuts")
		return
	}
	cut, err := subscribe.ReadCut(r.Context(), s.cfg.Store, o)
	if errors.Is(err, subscribe.ErrNoResolved) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newCutJSON(cut))
}

func newCutJSON(c *subscribe.Cut) cutJSON {
	out := cutJSON{Source: c.Source, After: c.After, Resolved: c.Resolved, Transactions: make([]transactionJSON, len(c.Transactions))}
	for i, tx := range c.Transactions {
		t := transactionJSON{Source: tx.Source, Xid: tx.Xid, CommitLSN: tx.CommitLSN, CommitTime: tx.CommitTime,
			Events: make([]subscribe.EventJSON, len(tx.Events))}
		if tx.Record != nil {
			t.Recorded = tx.Record.Topics
		}
		for j := range tx.Events {
			t.Events[j] = subscribe.NewEventJSON(&subscribe.Event{Event: tx.Events[j]})
		}
		out.Transactions[i] = t
	}
	return out
}
