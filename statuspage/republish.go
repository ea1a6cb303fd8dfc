package statuspage

import (
	"context"
	"sort"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// runsShown is how many of the newest redrives and repairs the page shows.
const runsShown = 20

// Run is one run that published events into their topics outside the
// stream: a dead-letter redrive or a reconcile repair (its
// catalog.RepublishRun), with its selection, error and refusals' reasons
// classed as the dead letters' are (no value a producer wrote).
type Run struct {
	catalog.RepublishRun
	Reasons []ReasonCount `json:"reasons,omitempty"`
}

// republishRuns reads the newest runs, newest first.
func republishRuns(ctx context.Context, store storage.Store) ([]Run, error) {
	runs, err := catalog.ListRepublishRuns(ctx, store, runsShown)
	if err != nil {
		return []Run{}, err
	}
	out := make([]Run, 0, len(runs))
	for _, r := range runs {
		classes := map[string]int64{}
		for reason, n := range r.Reasons {
			classes[reasonClass(reason)] += int64(n)
		}
		r.Selection, r.Error, r.Reasons = reasonClass(r.Selection), reasonClass(r.Error), nil
		row := Run{RepublishRun: r}
		for reason, n := range classes {
			row.Reasons = append(row.Reasons, ReasonCount{Reason: reason, Count: n})
		}
		sort.Slice(row.Reasons, func(i, j int) bool { return row.Reasons[i].Count > row.Reasons[j].Count })
		out = append(out, row)
	}
	return out, nil
}
