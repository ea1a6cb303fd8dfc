package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ParseCommit parses the newline-delimited JSON of one commit file into its
// actions, in file order. Blank lines are skipped and the last line may lack a
// trailing newline. Unknown action names give an all-nil Action and unknown
// fields are ignored; numbers decode into int64 fields exactly. A line that
// is not a JSON object, or a known action with a field of the wrong type, is
// an error naming the line.
func ParseCommit(data []byte) ([]Action, error) {
	actions := make([]Action, 0, bytes.Count(data, []byte{'\n'})+1)
	line := 0
	for len(data) > 0 {
		line++
		var cur []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			cur, data = data[:i], data[i+1:]
		} else {
			cur, data = data, nil
		}
		cur = bytes.TrimSpace(cur)
		if len(cur) == 0 {
			continue
		}
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
