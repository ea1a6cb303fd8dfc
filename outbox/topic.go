package outbox

import (
	"fmt"
	"strings"
)

// MaxTopicLen is the longest topic name accepted, in bytes.
const MaxTopicLen = 128

// ValidTopic reports whether name can be a topic: 1 to MaxTopicLen
// characters of [a-z0-9._-], starting with a lowercase letter or digit,
// with no "..". Topic names become path segments of the store (one Delta
// table per topic), so the rules keep them safe on every file system and
// object store. Names starting with "_" are reserved for internal tables
// such as DeadLetterTopic.
//
// The error says precisely what is wrong, e.g.
// `invalid topic name "Orders": uppercase letter 'O' at offset 0; topic names are lowercase`.
func ValidTopic(name string) error {
	if reason := topicProblem(name); reason != "" {
		return fmt.Errorf("invalid topic name %q: %s", name, reason)
	}
	return nil
}

// topicProblem returns why name is not a valid topic, or "" when it is.
// It does not allocate for valid names.
func topicProblem[S ~string | ~[]byte](name S) string {
	switch {
	case len(name) == 0:
		return "empty"
	case len(name) > MaxTopicLen:
		return fmt.Sprintf("%d bytes long, the limit is %d", len(name), MaxTopicLen)
	case name[0] == '_':
		return `names starting with "_" are reserved for internal tables`
	case name[0] == '.' || name[0] == '-':
		return fmt.Sprintf("starts with %q; topic names start with a lowercase letter or digit", name[0])
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.':
			if i > 0 && name[i-1] == '.' {
				return fmt.Sprintf(`contains ".." at offset %d`, i-1)
			}
		case c >= 'A' && c <= 'Z':
			return fmt.Sprintf("uppercase letter %q at offset %d; topic names are lowercase", c, i)
		default:
			return fmt.Sprintf("character %s at offset %d is not allowed (allowed: a-z 0-9 . _ -)",
				quoteByte(string(name)[i:]), i)
		}
	}
	return ""
}

// quoteByte quotes the character that starts s: the whole rune when s
// starts with valid UTF-8, else the single byte.
func quoteByte(s string) string {
	for _, r := range s {
		if r == '\uFFFD' && !strings.HasPrefix(s, "\uFFFD") {
			return fmt.Sprintf("byte 0x%02x", s[0])
		}
		return fmt.Sprintf("%q", r)
	}
	return `""`
}
