package serve

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// Tokens are the bearer tokens a server accepts, read from a file of one
// token per line:
//
//	# comment lines and blank lines are ignored
//	TOKEN                                  every group and topic
//	TOKEN name=billing groups=billing,billing-* topics=orders reveal
//
// After the token, whitespace-separated options: name= (how logs name the
// token; the token itself is never logged), groups= and topics= (comma-
// separated names or patterns with * and ?, path.Match's rules; default
// every one) and reveal (events come with personal fields decrypted, when
// the server has the key-encryption key). A token has at least 16
// characters and no whitespace. The file is read again when it changes.
type Tokens struct {
	path string
	mu   sync.RWMutex
	by   map[[32]byte]*Grant
	mod  time.Time
	size int64
	read time.Time
}

// Grant is what one token may do.
type Grant struct {
	Name           string
	Groups, Topics []string // patterns; empty: every one
	Reveal         bool
}

// Allows reports whether the grant covers group in topic.
func (g *Grant) Allows(group, topic string) bool {
	return matchAny(g.Groups, group) && matchAny(g.Topics, topic)
}

func matchAny(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// MinTokenLength is the shortest token accepted.
const MinTokenLength = 16

// LoadTokens reads the token file at p.
func LoadTokens(p string) (*Tokens, error) {
	t := &Tokens{path: p}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.by)
}

// Lookup returns the grant of token, nil when it is not one of the file's.
// The file is read again, at most every two seconds, when it changed; a
// file that no longer parses keeps the tokens read before (and says so
// in the error).
func (t *Tokens) Lookup(token string) (*Grant, error) {
	var err error
	t.mu.RLock()
	stale := time.Since(t.read) > 2*time.Second
	t.mu.RUnlock()
	if stale {
		err = t.reloadIfChanged()
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.by[sha256.Sum256([]byte(token))], err
}

func (t *Tokens) reloadIfChanged() error {
	fi, err := os.Stat(t.path)
	t.mu.Lock()
	t.read = time.Now()
	same := err == nil && fi.ModTime().Equal(t.mod) && fi.Size() == t.size
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("token file %s: %w (the tokens read before stay in force)", t.path, err)
	}
	if same {
		return nil
	}
	if err := t.reload(); err != nil {
		return fmt.Errorf("%w (the tokens read before stay in force)", err)
	}
	return nil
}

func (t *Tokens) reload() error {
	fi, err := os.Stat(t.path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	by, err := parseTokens(data)
	if err != nil {
		return fmt.Errorf("--token-file %s: %w", t.path, err)
	}
	t.mu.Lock()
	t.by, t.mod, t.size, t.read = by, fi.ModTime(), fi.Size(), time.Now()
	t.mu.Unlock()
	return nil
}

func parseTokens(data []byte) (map[[32]byte]*Grant, error) {
	by := map[[32]byte]*Grant{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		tok := fields[0]
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("line %d: the token is shorter than %d characters", n, MinTokenLength)
		}
		g := &Grant{Name: fmt.Sprintf("line %d", n)}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "name":
				g.Name = v
			case "groups", "topics":
				pats := strings.Split(v, ",")
				for _, p := range pats {
					if _, err := path.Match(p, ""); err != nil || p == "" {
						return nil, fmt.Errorf("line %d: %s pattern %q is invalid", n, k, p)
					}
				}
				if k == "groups" {
					g.Groups = pats
				} else {
					g.Topics = pats
				}
			case "reveal":
				if v != "" {
					return nil, fmt.Errorf("line %d: reveal takes no value", n)
				}
				g.Reveal = true
			default:
				return nil, fmt.Errorf("line %d: unknown option %q (name=, groups=, topics=, reveal)", n, k)
			}
		}
		h := sha256.Sum256([]byte(tok))
		if _, dup := by[h]; dup {
			return nil, fmt.Errorf("line %d: the token is on an earlier line too", n)
		}
		by[h] = g
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(by) == 0 {
		return nil, fmt.Errorf("no token in the file: give one token per line")
	}
	return by, nil
}
