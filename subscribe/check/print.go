package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/catalog"
)

// Breached reports whether any row breaches a threshold.
func Breached(rows []Row) bool {
	for _, r := range rows {
		if len(r.Breaches) > 0 {
			return true
		}
	}
	return false
}

// WriteJSON writes the rows as one JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// WriteText writes one line per row, then the breaches.
func WriteText(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPOSITION\tLAG (VERSIONS)\tLAG\tEARLIEST\tHEADROOM (VERSIONS)\tHEADROOM\tCOMPLETE\tDUPLICATES\tCHECKPOINTS\tSOURCES")
	for _, r := range rows {
		complete, dups := "-", "-"
		if c := r.Completeness; c != nil {
			complete = fmt.Sprintf("%.4f (%d/%d)", c.Ratio, c.Found, c.Expected)
			dups = fmt.Sprintf("%.4f (%d)", c.DuplicateRate, c.Duplicates)
		}
		topic := r.Topic
		if g, ok := catalog.GroupOfTable(r.Table); ok {
			topic += " (group " + g + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d:%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Group, topic, r.Version, r.Offset,
			r.LagVersions, secs(r.LagSeconds), r.EarliestVersion, r.HeadroomVersions, secs(r.HeadroomSeconds), complete, dups, r.Checkpoints, sourcesText(r.Sources))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if m := r.Members; m != nil {
			fmt.Fprintf(w, "MEMBERS %s/%s: %d in flight to %d members, %d unacknowledged, %d redelivered; protection: %s\n",
				r.Group, r.Topic, m.InFlight, len(m.Members), m.Unacked, m.Redelivered, m.Protection)
		}
	}
	for _, r := range rows {
		if len(r.Breaches) > 0 {
			fmt.Fprintf(w, "BREACH %s/%s: %s\n", r.Group, r.Topic, strings.Join(r.Breaches, "; "))
		}
	}
	return nil
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
