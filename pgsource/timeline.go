package pgsource

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// History is a timeline's history as its server keeps it (the timeline's
// .history file): the earlier timelines it descends from, each with the
// LSN where the next one began.
type History struct {
	Timeline uint32
	Switches []Switch // oldest first
}

// Switch says that Timeline ended at End, where its successor in the
// history began: WAL of Timeline at or past End is not part of it.
type Switch struct {
	Timeline uint32
	End      pglogrepl.LSN
}

// ReadHistory reads timeline tl's history over a replication connection
// (TIMELINE_HISTORY; timeline 1 has none).
func ReadHistory(ctx context.Context, conn *pgconn.PgConn, tl uint32) (History, error) {
	h := History{Timeline: tl}
	if tl <= 1 {
		return h, nil
	}
	res, err := pglogrepl.TimelineHistory(ctx, conn, int32(tl))
	if err != nil {
		return h, fmt.Errorf("read the history of timeline %d: %w", tl, err)
	}
	if h.Switches, err = parseHistory(string(res.Content)); err != nil {
		return h, fmt.Errorf("history of timeline %d: %w", tl, err)
	}
	return h, nil
}

// parseHistory parses a .history file: "<timeline>\t<LSN>\t<reason>"
// lines, oldest first; blank lines and '#' comments are skipped.
func parseHistory(s string) ([]Switch, error) {
	var out []Switch
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		tl, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("malformed timeline in %q", line)
		}
		end, err := pglogrepl.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("malformed LSN in %q", line)
		}
		if n := len(out); n > 0 && (uint32(tl) <= out[n-1].Timeline || end < out[n-1].End) {
			return nil, fmt.Errorf("line %q does not follow the one before it", line)
		}
		out = append(out, Switch{Timeline: uint32(tl), End: end})
	}
	return out, sc.Err()
}

// End returns where timeline tl ended in this history: ok is false when
// tl is not part of it (neither an ancestor nor the timeline itself), and
// current is true when tl is the history's own timeline, which has not
// ended.
func (h History) End(tl uint32) (end pglogrepl.LSN, current, ok bool) {
	if tl == h.Timeline {
		return 0, true, true
	}
	for _, s := range h.Switches {
		if s.Timeline == tl {
			return s.End, false, true
		}
	}
	return 0, false, false
}
