package decoding

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInfinity is returned by ParseTimestamptz for "infinity" and
// "-infinity", which time.Time cannot represent.
var ErrInfinity = errors.New("infinite timestamp")

// ParseTimestamptz parses PostgreSQL's text output of a timestamptz under
// DateStyle ISO, such as "2026-11-30 07:48:59.123456+00",
// "1900-01-01 00:00:00+00:19:32", "10000-01-01 00:00:00+05:30" or
// "0044-03-15 12:00:00+00 BC", and returns the instant in UTC. "infinity"
// and "-infinity" yield an error wrapping ErrInfinity. It does not allocate
// unless it fails.
func ParseTimestamptz(text []byte) (time.Time, error) {
	t, ok := parseTimestamptz(text)
	if !ok {
		switch string(text) {
		case "infinity", "-infinity":
			return time.Time{}, fmt.Errorf("parse timestamptz %q: %w", text, ErrInfinity)
		}
		return time.Time{}, fmt.Errorf("parse timestamptz %q: not PostgreSQL ISO output", text)
	}
	return t, nil
}

func parseTimestamptz(s []byte) (time.Time, bool) {
	if t, ok := parseCommonTimestamptz(s); ok {
		return t, true
	}
	return parseAnyTimestamptz(s)
}

// parseAnyTimestamptz reads every form ParseTimestamptz accepts.
func parseAnyTimestamptz(s []byte) (time.Time, bool) {
	p := textParser{s: s}
	year := p.digitsUntil('-', 4, 7)
	month, day := p.fixed(2, '-'), p.fixed(2, ' ')
	hour, minute := p.fixed(2, ':'), p.fixed(2, ':')
	sec := p.fixed(2, 0)
	nanos := p.fraction()
	offset := p.offset()
	if p.bad || year < 1 {
		return time.Time{}, false
	}
	switch rest := string(p.s[p.pos:]); rest {
	case "":
	case " BC":
		year = 1 - year
	default:
		return time.Time{}, false
	}
	return instant(year, month, day, hour, minute, sec, nanos, offset)
}

// instant checks the fields of a date and time (year counted
// astronomically, offset in seconds east of UTC) and returns the instant
// in UTC.
func instant(year, month, day, hour, minute, sec, nanos, offset int) (time.Time, bool) {
	if month < 1 || month > 12 || day < 1 || day > daysIn(time.Month(month), year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	secs := daysFromCivil(int64(year), month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return time.Unix(secs, int64(nanos)).UTC(), true
}

// parseCommonTimestamptz reads the shape nearly every value has, a
// four-digit year AD: "YYYY-MM-DD HH:MM:SS[.f{1,6}]±HH[:MM]", with fixed
// offsets and no per-field calls. Anything else (ok false) goes to the
// general parser, which also decides whether it is valid.
func parseCommonTimestamptz(s []byte) (time.Time, bool) {
	if len(s) < 22 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	var bad byte
	digit := func(i int) int {
		c := s[i] - '0'
		bad |= c / 10 // 0 for a digit, non-zero (with wrap-around) otherwise
		return int(c)
	}
	two := func(i int) int { return digit(i)*10 + digit(i+1) }
	year := two(0)*100 + two(2)
	month, day, hour, minute, sec := two(5), two(8), two(11), two(14), two(17)
	i, nanos := 19, 0
	if s[i] == '.' {
		scale := 100_000_000
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9' && scale >= 1000; i++ {
			nanos += int(s[i]-'0') * scale
			scale /= 10
		}
		if scale == 100_000_000 {
			return time.Time{}, false
		}
	}
	if n := len(s) - i; (n != 3 && n != 6) || (s[i] != '+' && s[i] != '-') || (n == 6 && s[i+3] != ':') {
		return time.Time{}, false
	}
	offset := two(i+1) * 3600
	if len(s)-i == 6 {
		offset += two(i+4) * 60
	}
	if s[i] == '-' {
		offset = -offset
	}
	if bad != 0 || year < 1 {
		return time.Time{}, false
	}
	return instant(year, month, day, hour, minute, sec, nanos, offset)
}

// daysFromCivil is the number of days from 1970-01-01 to the given date of
// the proleptic Gregorian calendar (year counted astronomically), by Howard
// Hinnant's algorithm: a third of time.Date's cost, which normalises every
// field and consults the location.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400 // [0, 399]
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1 // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// daysIn is the number of days of month m (1-12) in the proleptic Gregorian
// calendar, year counted astronomically (0 = 1 BC).
func daysIn(m time.Month, year int) int {
	if m == time.February && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int(daysPerMonth[m-1])
}

var daysPerMonth = [12]uint8{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// textParser reads ASCII fields; the first mismatch sets bad and every later
// read returns 0.
type textParser struct {
	s   []byte
	pos int
	bad bool
}

// digitsUntil reads min..max digits followed by sep (consumed).
func (p *textParser) digitsUntil(sep byte, min, max int) int {
	v, n := 0, 0
	for !p.bad && p.pos < len(p.s) && isDigit(p.s[p.pos]) && n < max {
		v = v*10 + int(p.s[p.pos]-'0')
		p.pos++
		n++
	}
	p.bad = p.bad || n < min || !p.eat(sep)
	return v
}

// fixed reads exactly n digits followed by sep (consumed) unless sep is 0.
func (p *textParser) fixed(n int, sep byte) int {
	if p.bad || len(p.s)-p.pos < n {
		p.bad = true
		return 0
	}
	v := 0
	for _, c := range p.s[p.pos : p.pos+n] {
		if !isDigit(c) {
			p.bad = true
			return 0
		}
		v = v*10 + int(c-'0')
	}
	p.pos += n
	if sep != 0 && !p.eat(sep) {
		p.bad = true
	}
	return v
}

func (p *textParser) eat(c byte) bool {
	if p.bad || p.pos >= len(p.s) || p.s[p.pos] != c {
		return false
	}
	p.pos++
	return true
}

// fraction reads an optional ".d{1,9}" and returns nanoseconds.
func (p *textParser) fraction() int {
	if !p.eat('.') {
		return 0
	}
	v, n := 0, 0
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		if n == 9 {
			p.bad = true
			return 0
		}
		v = v*10 + int(p.s[p.pos]-'0')
		p.pos++
		n++
	}
	if n == 0 {
		p.bad = true
		return 0
	}
	for ; n < 9; n++ {
		v *= 10
	}
	return v
}

// offset reads "±HH", "±HH:MM" or "±HH:MM:SS" and returns seconds east of UTC.
func (p *textParser) offset() int {
	sign := 1
	switch {
	case p.eat('+'):
	case p.eat('-'):
		sign = -1
	default:
		p.bad = true
		return 0
	}
	secs := p.fixed(2, 0) * 3600
	if p.eat(':') {
		secs += p.fixed(2, 0) * 60
		if p.eat(':') {
			secs += p.fixed(2, 0)
		}
	}
	return sign * secs
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ParseInt64 parses the text of a PostgreSQL integer (smallint, integer,
// bigint) without allocating unless it fails.
func ParseInt64(text []byte) (int64, error) {
	s := text
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, fmt.Errorf("parse integer %q: no digits", text)
	}
	var u uint64
	for _, c := range s {
		if !isDigit(c) {
			return 0, fmt.Errorf("parse integer %q: invalid character %q", text, c)
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, fmt.Errorf("parse integer %q: out of range", text)
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	case neg && u <= 1<<63:
		return int64(-u), nil
	}
	return 0, fmt.Errorf("parse integer %q: out of range", text)
}

// ParseInt32 is ParseInt64 for a value that must fit an int32 (an integer
// column such as schema_version).
func ParseInt32(text []byte) (int32, error) {
	v, err := ParseInt64(text)
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("parse integer %q: out of int32 range", text)
	}
	return int32(v), nil
}
