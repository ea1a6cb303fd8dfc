package storage

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey is returned (wrapped, with the offending key) for keys that
// break the rules of ValidateKey.
var ErrInvalidKey = errors.New("invalid key")

// ValidateKey reports whether key is a valid object key: non-empty, valid
// UTF-8, no NUL byte, no leading or trailing "/", and no empty, "." or ".."
// segment. The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	if reason := keyProblem(key); reason != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, reason)
	}
	return nil
}

func keyProblem(key string) string {
	switch {
	case key == "":
		return "empty"
	case !utf8.ValidString(key):
		return "not valid UTF-8"
	case strings.IndexByte(key, 0) >= 0:
		return "contains a NUL byte"
	case strings.HasPrefix(key, "/"):
		return `starts with "/"`
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return "has an empty segment"
		case ".", "..":
			return fmt.Sprintf("has a %q segment", seg)
		}
	}
	return ""
}

// validatePrefix checks a List prefix: "" or any string whose complete
// segments (everything up to the last "/") form a valid key. The last,
// partial segment may be anything a key segment may start with.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("%w: list prefix %q: not valid UTF-8 or contains NUL", ErrInvalidKey, prefix)
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("%w: list prefix %q: starts with \"/\"", ErrInvalidKey, prefix)
	}
	dir, _ := splitDir(prefix)
	if dir == "" {
		return nil
	}
	if reason := keyProblem(dir); reason != "" {
		return fmt.Errorf("%w: list prefix %q: directory part %s", ErrInvalidKey, prefix, reason)
	}
	return nil
}

// splitDir splits a key or prefix at its last "/": "a/b/c" → ("a/b", "c").
func splitDir(key string) (dir, name string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", key
	}
	return key[:i], key[i+1:]
}

// joinKey joins a store prefix and a relative key ("" prefix = key itself).
func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "/" + key
}
