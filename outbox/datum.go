package outbox

import (
	"errors"
	"time"
)

// The replication stream sends column values in their text output form.
// These parsers read the forms PostgreSQL produces (DateStyle ISO) without
// allocating.

var (
	errNotUUID      = errors.New("not a uuid")
	errNotInt       = errors.New("not a 32-bit integer")
	errNotTimestamp = errors.New("not an ISO timestamp")
)

// isUUID reports whether b is a uuid in 8-4-4-4-12 hex form (either case).
func isUUID(b []byte) bool {
	if len(b) != 36 {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if hexVal(c) < 0 {
				return false
			}
		}
	}
	return true
}

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

// parseInt32 reads a decimal integer with an optional sign.
func parseInt32(b []byte) (int32, error) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, errNotInt
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotInt
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0, errNotInt
	}
	return int32(n), nil
}

// parseTimestamp reads PostgreSQL's ISO text output of timestamptz
// ("2026-11-30 07:48:59.123456+00", offsets like "+05:30" or "-03:30:15")
// or of timestamp without time zone (no offset: taken as UTC). It returns
// UTC time truncated to microseconds. Years outside 1..9999, "BC" and
// infinities are rejected.
func parseTimestamp(b []byte) (time.Time, error) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != ' ' && b[10] != 'T') || b[13] != ':' || b[16] != ':' {
		return time.Time{}, errNotTimestamp
	}
	var f [6]int
	for i, pos := range [6]int{0, 5, 8, 11, 14, 17} {
		n := 2
		if i == 0 {
			n = 4
		}
		v, ok := digits(b[pos : pos+n])
		if !ok {
			return time.Time{}, errNotTimestamp
		}
		f[i] = v
	}
	rest := b[19:]
	nsec, rest, ok := fraction(rest)
	if !ok {
		return time.Time{}, errNotTimestamp
	}
	offset, ok := zoneOffset(rest)
	if !ok || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 60 {
		return time.Time{}, errNotTimestamp
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], nsec, time.UTC)
	if t.Day() != f[2] {
		return time.Time{}, errNotTimestamp // e.g. February 30
	}
	return t.Add(-time.Duration(offset) * time.Second).Truncate(time.Microsecond), nil
}

// fraction reads an optional ".ffffff" and returns nanoseconds.
func fraction(b []byte) (int, []byte, bool) {
	if len(b) == 0 || b[0] != '.' {
		return 0, b, true
	}
	i, nsec, scale := 1, 0, 100_000_000
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		nsec += int(b[i]-'0') * scale
		scale /= 10
	}
	return nsec, b[i:], i > 1 && i <= 10
}

// zoneOffset reads "", "+HH", "+HH:MM" or "+HH:MM:SS" (or "-") as seconds
// east of UTC.
func zoneOffset(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, true
	}
	if (b[0] != '+' && b[0] != '-') || (len(b) != 3 && len(b) != 6 && len(b) != 9) {
		return 0, false
	}
	secs := 0
	for i, mul := 1, 3600; i < len(b); i, mul = i+3, mul/60 {
		if i > 1 && b[i-1] != ':' {
			return 0, false
		}
		v, ok := digits(b[i : i+2])
		if !ok || v > 59 && i > 1 {
			return 0, false
		}
		secs += v * mul
	}
	if b[0] == '-' {
		secs = -secs
	}
	return secs, true
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
