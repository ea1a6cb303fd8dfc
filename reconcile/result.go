package reconcile

import "time"

// Status is the outcome of one (topic, window).
type Status string

// Statuses. Clean and Diverged are verdicts; Unreadable and Error mean the
// window could not be checked.
const (
	StatusClean      Status = "clean"
	StatusDiverged   Status = "diverged"
	StatusUnreadable Status = "unreadable" // a data file it needs is missing or corrupt
	StatusError      Status = "error"      // the topic's log could not be loaded
)

// Check says how far a window was verified.
const (
	CheckCounts = "counts" // source count = log count (no id read)
	CheckIDs    = "ids"    // every id of the window compared
	CheckNarrow = "counts+narrowed-ids"
)

// Duplicate is an event id present more than once in the log.
type Duplicate struct {
	ID     string `json:"id"`
	Copies int    `json:"copies"`
}

// Result is the verdict for one topic and closed window. Id lists are exact
// up to Options.MaxIDs entries each; the counts are always exact.
type Result struct {
	Topic string `json:"topic"`
	// Table is the group's table that holds the topic's events when it
	// shares one (catalog.Group), "" when the topic has its own table.
	Table       string `json:"table,omitempty"`
	Window      Window `json:"window"`
	Status      Status `json:"status"`
	Check       string `json:"check,omitempty"`
	SourceCount int64  `json:"sourceCount"`
	// LogCount is nil when unreadable.
	LogCount *int64 `json:"logCount"`
	// DistinctCount is the number of distinct ids in the log for the
	// window; nil unless every id of the window was read (check "ids").
	DistinctCount *int64 `json:"distinctCount"`

	Missing         []string    `json:"missing,omitempty"`
	MissingCount    int64       `json:"missingCount"`
	Unexpected      []string    `json:"unexpected,omitempty"`
	UnexpectedCount int64       `json:"unexpectedCount"`
	Duplicates      []Duplicate `json:"duplicates,omitempty"`
	DuplicateCount  int64       `json:"duplicateCount"` // extra copies beyond the first
	// Cleaned counts log events absent from the source whose occurred_at is
	// older than the retention horizon: explained by outbox clean-up.
	Cleaned int64 `json:"cleaned"`
	// DeadLettered lists source rows absent from the topic that are in the
	// _dead_letter table instead.
	DeadLettered []string `json:"deadLettered,omitempty"`
	// LateCommits lists log events the check's snapshot did not see but the
	// source holds now: they committed later than the lateness allowance.
	LateCommits []string `json:"lateCommits,omitempty"`
	// Phantoms lists the unexpected events a fork record names
	// (catalog.Fork): published from a timeline the source abandoned at a
	// failover, lost with its old primary. They stay in Unexpected and
	// count as a divergence: consumers may have acted on them.
	Phantoms []string `json:"phantoms,omitempty"`
	// Repaired is how many of the missing events `relay reconcile
	// --repair` published from their outbox rows, by run RepairID (whose
	// record, and the _republished table, list each one).
	Repaired int64  `json:"repaired,omitempty"`
	RepairID string `json:"repairId,omitempty"`
	// Narrowed lists the ranges diffed id by id after bisection.
	Narrowed   []Window `json:"narrowed,omitempty"`
	Unreadable []string `json:"unreadable,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Skipped is a window not checked, for every topic, with the reason.
type Skipped struct {
	Window Window `json:"window"`
	Reason string `json:"reason"`
}

// Report is the outcome of one run.
type Report struct {
	RunID    string    `json:"runId"`
	AppID    string    `json:"appId"`      // the source whose events were checked (its relay's appId)
	RunAt    time.Time `json:"runAt"`      // server time T0 of the snapshot
	From     time.Time `json:"from"`       // checked range [From, To)
	To       time.Time `json:"to"`         //
	Window   string    `json:"window"`     // window size
	Lateness string    `json:"lateness"`   //
	Horizon  time.Time `json:"horizon"`    // T0 - retention
	WAL      string    `json:"walLsn"`     // W0
	Durable  string    `json:"durableLsn"` // slot confirmed_flush_lsn when last read
	Tables   []string  `json:"tables"`     // outbox tables read
	Results  []Result  `json:"results"`
	// Forks are the source's failovers whose old timeline had published
	// events the new one lacks (catalog.Fork), with their phantoms' count.
	Forks      []ForkSummary `json:"forks,omitempty"`
	Skipped    []Skipped     `json:"skipped"`
	Took       time.Duration `json:"tookNs"`
	RecordedAt *int64        `json:"recordedVersion,omitempty"` // _reconciliation version
}

// Exit codes of a run.
const (
	ExitClean      = 0
	ExitDivergence = 1
	ExitCannotRun  = 2
	// ExitNothingChecked: every window was skipped (open, beyond
	// retention) or no topic had events: a scheduled run that checked
	// nothing must not read as a pass.
	ExitNothingChecked = 3
)

// ExitCode is 1 when any window diverged or is unreadable (the log is
// wrong or damaged), else 2 when a topic's log could not be loaded, else 3
// when nothing was checked, else 0. Skipped windows do not count.
func (r *Report) ExitCode() int {
	if len(r.Results) == 0 {
		return ExitNothingChecked
	}
	code := ExitClean
	for _, res := range r.Results {
		switch res.Status {
		case StatusDiverged, StatusUnreadable:
			return ExitDivergence
		case StatusError:
			code = ExitCannotRun
		}
	}
	return code
}

// Diverged reports whether any window diverged.
func (r *Report) Diverged() bool {
	for _, res := range r.Results {
		if res.Status == StatusDiverged {
			return true
		}
	}
	return false
}

// ForkSummary names one recorded fork of the source's timelines.
type ForkSummary struct {
	FromTimeline uint32    `json:"fromTimeline"`
	ToTimeline   uint32    `json:"toTimeline"`
	ForkLSN      string    `json:"forkLsn"`
	DetectedAt   time.Time `json:"detectedAt"`
	Phantoms     int       `json:"phantoms"`
}
