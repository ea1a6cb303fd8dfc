package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"unicode/utf8"
)

// ParseCommit parses the newline-delimited JSON of one commit file into its
// actions, in file order. Blank lines are skipped and the last line may lack a
// trailing newline. Unknown action names give an all-nil Action and unknown
// fields are ignored; numbers decode into int64 fields exactly. A line that
// is not a JSON object, or a known action with a field of the wrong type, is
// an error naming the line.
func ParseCommit(data []byte) ([]Action, error) {
	actions := make([]Action, 0, bytes.Count(data, []byte{'\n'})+1)
	for line, cur := range commitLines(data) {
		if cur[0] != '{' {
			return nil, fmt.Errorf("line %d: not a JSON object", line)
		}
		var a Action
		if err := json.Unmarshal(cur, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		normalizeAction(&a)
		actions = append(actions, a)
	}
	return actions, nil
}

// commitLines yields the non-blank lines of a commit file, trimmed, with
// their 1-based line numbers; the last line may lack a trailing newline.
func commitLines(data []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		rest := data
		for line := 1; len(rest) > 0; line++ {
			var cur []byte
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				cur, rest = rest[:i], rest[i+1:]
			} else {
				cur, rest = rest, nil
			}
			if cur = bytes.TrimSpace(cur); len(cur) > 0 && !yield(line, cur) {
				return
			}
		}
	}
}

// firstCommitInfo returns the first commitInfo action of a commit file
// (nil if it has none). Unlike ParseCommit it decodes only the lines that
// can hold one, so the commit of a compaction that removed thousands of
// files costs a scan of its bytes, not a decode of every action; the
// lines it skips are not validated.
func firstCommitInfo(data []byte) (*CommitInfo, error) {
	for line, cur := range commitLines(data) {
		if !mayHoldCommitInfo(cur) {
			continue
		}
		var a struct {
			CommitInfo *CommitInfo `json:"commitInfo"`
		}
		if err := json.Unmarshal(cur, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if a.CommitInfo != nil {
			return a.CommitInfo, nil
		}
	}
	return nil, nil
}

// mayHoldCommitInfo reports whether a commit line can decode to an action
// with a commitInfo. encoding/json matches object keys case-insensitively
// (with Unicode folding: U+0130 folds to i), and a key can spell commitInfo
// in other bytes by way of \u escapes, so a line with either non-ASCII
// bytes or a \u escape is decoded whatever it holds.
func mayHoldCommitInfo(line []byte) bool {
	const name = "commitinfo"
	if bytes.Contains(line, []byte(`\u`)) || !isASCII(line) {
		return true
	}
	for i := bytes.IndexAny(line, "cC"); i >= 0 && len(line)-i >= len(name); {
		if bytes.EqualFold(line[i:i+len(name)], []byte(name)) {
			return true
		}
		j := bytes.IndexAny(line[i+1:], "cC")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// normalizeAction maps JSON null deletion vectors to absent ones.
func normalizeAction(a *Action) {
	if a.Add != nil && string(a.Add.DeletionVector) == "null" {
		a.Add.DeletionVector = nil
	}
	if a.Remove != nil && string(a.Remove.DeletionVector) == "null" {
		a.Remove.DeletionVector = nil
	}
}

// EncodeCommit renders actions as a commit file: one JSON object per line,
// each line terminated by a newline.
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i, a := range actions {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encode action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}
