package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a readable table: one line per topic and window, then
// the exact ids of every divergence and the skipped windows.
func (r *Report) WriteText(w io.Writer, sample int) error {
	fmt.Fprintf(w, "reconcile %s  range %s .. %s  window %s  lateness %s  wal %s  durable %s\n",
		r.RunAt.Format(time.RFC3339), r.From.Format(time.RFC3339), r.To.Format(time.RFC3339),
		r.Window, r.Lateness, r.WAL, r.Durable)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tWINDOW START\tSTATUS\tSOURCE\tLOG\tDISTINCT\tMISSING\tUNEXPECTED\tDUPLICATES\tCLEANED\tCHECK")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", res.Topic, res.Window.Start.Format(time.RFC3339),
			res.Status, res.SourceCount, optInt(res.LogCount), optInt(res.DistinctCount), res.MissingCount,
			res.UnexpectedCount, res.DuplicateCount, res.Cleaned, res.Check)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		writeDetails(w, res, sample)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Window, s.Reason)
	}
	for _, f := range r.Forks {
		fmt.Fprintf(w, "failover: timeline %d forked to %d at %s (found %s): %d phantoms recorded\n",
			f.FromTimeline, f.ToTimeline, f.ForkLSN, f.DetectedAt.Format(time.RFC3339), f.Phantoms)
	}
	fmt.Fprintf(w, "%s\n", r.summary())
	return nil
}

func writeDetails(w io.Writer, res Result, sample int) {
	head := res.Topic + " " + res.Window.String()
	list := func(what string, n int64, ids []string) {
		if n > 0 || len(ids) > 0 {
			fmt.Fprintf(w, "  %s %s (%d): %s\n", head, what, max(n, int64(len(ids))), sampleIDs(ids, sample))
		}
	}
	list("missing from the log", res.MissingCount, res.Missing)
	list("in the log, not in the source", res.UnexpectedCount, res.Unexpected)
	list("of which phantoms (published from a timeline the source abandoned at a failover)", 0, res.Phantoms)
	if len(res.Duplicates) > 0 {
		parts := make([]string, 0, len(res.Duplicates))
		for _, d := range res.Duplicates {
			parts = append(parts, fmt.Sprintf("%s x%d", d.ID, d.Copies))
		}
		fmt.Fprintf(w, "  %s duplicated in the log (%d extra): %s\n", head, res.DuplicateCount, sampleIDs(parts, sample))
	}
	if res.Repaired > 0 {
		fmt.Fprintf(w, "  %s repaired: %d missing events published from their outbox rows (run %s)\n", head, res.Repaired, res.RepairID)
	}
	list("dead-lettered (in _dead_letter, not an error)", 0, res.DeadLettered)
	list("committed after the lateness allowance (not an error)", 0, res.LateCommits)
	for _, u := range res.Unreadable {
		fmt.Fprintf(w, "  %s unreadable: %s\n", head, u)
	}
	if res.Error != "" {
		fmt.Fprintf(w, "  %s error: %s\n", head, res.Error)
	}
}

func sampleIDs(ids []string, n int) string {
	if n > 0 && len(ids) > n {
		return strings.Join(ids[:n], " ") + fmt.Sprintf(" ... (%d more; --json lists up to --max-ids)", len(ids)-n)
	}
	return strings.Join(ids, " ")
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func (r *Report) summary() string {
	counts := map[Status]int{}
	for _, res := range r.Results {
		counts[res.Status]++
	}
	verdict := "clean"
	switch r.ExitCode() {
	case ExitDivergence:
		verdict = "DIVERGENCE"
	case ExitCannotRun:
		verdict = "INCOMPLETE"
	case ExitNothingChecked:
		verdict = "NOTHING CHECKED (every window open, beyond retention, or empty)"
	}
	return fmt.Sprintf("%s: %d clean, %d diverged, %d unreadable, %d error, %d windows skipped; took %s",
		verdict, counts[StatusClean], counts[StatusDiverged], counts[StatusUnreadable], counts[StatusError],
		len(r.Skipped), r.Took.Round(time.Millisecond))
}
