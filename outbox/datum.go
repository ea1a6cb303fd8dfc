package outbox

import (
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// The replication stream sends column values in their text output form.
// Integers and timestamps are read with the decoding package's parsers
// (DateStyle ISO); the uuid check is here.

// oidTimestamp is timestamp without time zone, whose text has no offset.
const oidTimestamp = 1114

// parseTimestamp reads the text of a timestamptz or, when withoutZone, of
// a timestamp without time zone (taken as UTC). It returns UTC truncated
// to microseconds.
func parseTimestamp(b []byte, withoutZone bool) (time.Time, error) {
	if withoutZone {
		b = append(b[:len(b):len(b)], "+00"...)
	}
	t, err := decoding.ParseTimestamptz(b)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// isUUID reports whether b is a uuid in 8-4-4-4-12 hex form (either case).
func isUUID(b []byte) bool {
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return false
	}
	var bad byte
	for _, part := range [...][]byte{b[:8], b[9:13], b[14:18], b[19:23], b[24:]} {
		for _, c := range part {
			bad |= notHex[c]
		}
	}
	return bad == 0
}

// notHex is 1 for every byte that is not a hex digit.
var notHex = func() (t [256]byte) {
	for c := range t {
		if hexVal(byte(c)) < 0 {
			t[c] = 1
		}
	}
	return t
}()

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
