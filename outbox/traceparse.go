package outbox

import (
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// headerField returns the value of the top-level field key of the JSON
// object text h when it is a string without escapes (trace context values
// never need one). It scans h once and allocates nothing; fields of nested
// objects and strings that merely contain the key do not count.
func headerField(h, key string) (string, bool) {
	i := skipSpace(h, 0)
	if i >= len(h) || h[i] != '{' {
		return "", false
	}
	depth, isKey := 0, false
	for ; i < len(h); i++ {
		switch h[i] {
		case '{', '[':
			depth++
			isKey = depth == 1
		case '}', ']':
			depth--
		case ',':
			isKey = depth == 1
		case '"':
			end, ok := stringEnd(h, i)
			if !ok {
				return "", false
			}
			s, wasKey := h[i+1:end], isKey
			i, isKey = end, false
			if !wasKey || s != key {
				continue
			}
			j := skipSpace(h, end+1)
			if j >= len(h) || h[j] != ':' {
				return "", false
			}
			j = skipSpace(h, j+1)
			if j >= len(h) || h[j] != '"' {
				return "", false
			}
			vend, ok := stringEnd(h, j)
			if !ok || strings.IndexByte(h[j+1:vend], '\\') >= 0 {
				return "", false
			}
			return h[j+1 : vend], true
		}
	}
	return "", false
}

// stringEnd returns the index of the quote closing the JSON string that
// opens at h[i].
func stringEnd(h string, i int) (int, bool) {
	for j := i + 1; j < len(h); j++ {
		switch h[j] {
		case '\\':
			j++
		case '"':
			return j, true
		}
	}
	return 0, false
}

func skipSpace(h string, i int) int {
	for i < len(h) && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n' || h[i] == '\r') {
		i++
	}
	return i
}

// parseTraceparent reads a W3C traceparent: version-traceid-parentid-flags,
// lowercase hex; version ff, all-zero ids and, for version 00, anything
// after the flags are invalid.
func parseTraceparent(v string) (trace.SpanContext, bool) {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || (len(v) > 55 && (v[:2] == "00" || v[55] != '-')) {
		return trace.SpanContext{}, false
	}
	if !lowerHex(v[:2]) || v[:2] == "ff" || !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:55]) {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(v[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(v[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	flags := trace.TraceFlags(unhex(v[53])<<4|unhex(v[54])) & trace.FlagsSampled
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
