package statuspage

import (
	"context"
	"sort"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// runsShown is how many of the newest redrives and repairs the page shows.
const runsShown = 20

// Run is one run that published events into their topics outside the
// stream: a dead-letter redrive or a reconcile repair (catalog.
// RepublishRun), with its refusals' reasons classed as the dead letters'
// are (no value a producer wrote).
type Run struct {
	ID          string                  `json:"id"`
	Kind        string                  `json:"kind"`
	Actor       string                  `json:"actor"`
	Host        string                  `json:"host,omitempty"`
	Selection   string                  `json:"selection"`
	Started     time.Time               `json:"started"`
	Finished    time.Time               `json:"finished,omitzero"`
	State       string                  `json:"state"`
	Error       string                  `json:"error,omitempty"`
	Events      int                     `json:"events"`
	Republished int                     `json:"republished"`
	Present     int                     `json:"present"`
	Refused     int                     `json:"refused"`
	Topics      []catalog.RepublishedTo `json:"topics,omitempty"`
	Reasons     []ReasonCount           `json:"reasons,omitempty"`
}

// republishRuns reads the newest runs, newest first.
func republishRuns(ctx context.Context, store storage.Store) ([]Run, error) {
	runs, err := catalog.ListRepublishRuns(ctx, store, runsShown)
	if err != nil {
		return []Run{}, err
	}
	out := make([]Run, 0, len(runs))
	for _, r := range runs {
		row := Run{ID: r.ID, Kind: r.Kind, Actor: r.Actor, Host: r.Host, Selection: reasonClass(r.Selection), Started: r.Started,
			Finished: r.Finished, State: r.State, Error: reasonClass(r.Error), Events: r.Events, Republished: r.Republished,
			Present: r.Present, Refused: r.Refused, Topics: r.Topics}
		classes := map[string]int64{}
		for reason, n := range r.Reasons {
			classes[reasonClass(reason)] += int64(n)
		}
		for reason, n := range classes {
			row.Reasons = append(row.Reasons, ReasonCount{Reason: reason, Count: n})
		}
		sort.Slice(row.Reasons, func(i, j int) bool { return row.Reasons[i].Count > row.Reasons[j].Count })
		out = append(out, row)
	}
	return out, nil
}
