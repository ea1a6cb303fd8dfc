package decoding

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseTimestamptz(t *testing.T) {
	cases := []struct {
		in   string
		want time.Time
	}{
		{"2026-11-30 07:48:59.123456+00", time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)},
		{"2026-11-30 07:48:59+00", time.Date(2026, 11, 30, 7, 48, 59, 0, time.UTC)},
		{"2026-11-30 13:18:59.5+05:30", time.Date(2026, 11, 30, 7, 48, 59, 500000000, time.UTC)},
		{"2026-11-30 04:18:59.01-03:30", time.Date(2026, 11, 30, 7, 48, 59, 10000000, time.UTC)},
		{"1900-01-01 00:00:00+00:19:32", time.Date(1899, 12, 31, 23, 40, 28, 0, time.UTC)},
		{"2024-02-29 23:59:59.999999-12", time.Date(2024, 3, 1, 11, 59, 59, 999999000, time.UTC)},
		{"10000-01-01 00:00:00+00", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0001-01-01 00:00:00+00", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0001-01-01 00:00:00+00 BC", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"4713-11-24 00:00:00+00 BC", time.Date(-4712, 11, 24, 0, 0, 0, 0, time.UTC)},
		{"294276-12-31 23:59:59.999999+00", time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	for _, c := range cases {
		got, err := ParseTimestamptz([]byte(c.in))
		if err != nil || !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("ParseTimestamptz(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"infinity", "-infinity"} {
		if _, err := ParseTimestamptz([]byte(in)); !errors.Is(err, ErrInfinity) {
			t.Errorf("ParseTimestamptz(%q) error = %v, want ErrInfinity", in, err)
		}
	}
	for _, in := range []string{"", "2026", "2026-11-30", "2026-11-30 07:48:59", "2026-11-30 07:48:59Z",
		"2026-11-30T07:48:59+00", "2026-13-01 00:00:00+00", "2026-02-29 00:00:00+00", "2026-11-30 24:00:00+00",
		"2026-11-30 07:60:00+00", "2026-11-30 07:48:60+00", "2026-11-30 07:48:59.+00", "2026-11-30 07:48:59.1234567890+00",
		"2026-11-30 07:48:59+0", "2026-11-30 07:48:59+00:3", "2026-11-30 07:48:59+00 AD", "0000-01-01 00:00:00+00",
		"26-11-30 07:48:59+00", "Mon Nov 30 07:48:59 2026 UTC", "11/30/2026 07:48:59 UTC", "2026-11-30 07:48:59+00 BCX"} {
		if got, err := ParseTimestamptz([]byte(in)); err == nil {
			t.Errorf("ParseTimestamptz(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseTimestamptzDoesNotAllocate(t *testing.T) {
	in := []byte("2026-11-30 13:18:59.123456+05:30")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseTimestamptz(in) }); n != 0 {
		t.Fatalf("ParseTimestamptz allocates %v times", n)
	}
	num := []byte("-9223372036854775808")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseInt64(num) }); n != 0 {
		t.Fatalf("ParseInt64 allocates %v times", n)
	}
}

func TestParseInt(t *testing.T) {
	ok := map[string]int64{"0": 0, "1": 1, "-1": -1, "+7": 7, "007": 7, "9223372036854775807": math.MaxInt64,
		"-9223372036854775808": math.MinInt64, "-32768": -32768}
	for in, want := range ok {
		if got, err := ParseInt64([]byte(in)); err != nil || got != want {
			t.Errorf("ParseInt64(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "+", "1.0", " 1", "1 ", "0x10", "9223372036854775808",
		"-9223372036854775809", "99999999999999999999999", "1e3"} {
		if got, err := ParseInt64([]byte(in)); err == nil {
			t.Errorf("ParseInt64(%q) = %d, want an error", in, got)
		}
	}
	if v, err := ParseInt32([]byte("-2147483648")); err != nil || v != math.MinInt32 {
		t.Errorf("ParseInt32(min) = %d, %v", v, err)
	}
	for _, in := range []string{"2147483648", "-2147483649"} {
		if _, err := ParseInt32([]byte(in)); err == nil {
			t.Errorf("ParseInt32(%q) succeeded", in)
		}
	}
}

func TestTextValue(t *testing.T) {
	if s, null := TextValue(text("héllo")); s != "héllo" || null {
		t.Errorf("TextValue(text) = %q, %v", s, null)
	}
	if s, null := TextValue(text("")); s != "" || null {
		t.Errorf("TextValue(empty) = %q, %v", s, null)
	}
	if s, null := TextValue(null); s != "" || !null {
		t.Errorf("TextValue(null) = %q, %v", s, null)
	}
	if s, null := TextValue(unchanged); s != "" || null {
		t.Errorf("TextValue(unchanged) = %q, %v", s, null)
	}
}

// TestDaysFromCivilMatchesTimeDate checks the calendar arithmetic against
// the standard library over every day of 40 centuries around year 0 and a
// sample of the whole timestamptz range.
func TestDaysFromCivilMatchesTimeDate(t *testing.T) {
	check := func(y, m, d int) {
		want := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Unix() / 86400
		if got := daysFromCivil(int64(y), m, d); got != want {
			t.Fatalf("daysFromCivil(%d, %d, %d) = %d; want %d", y, m, d, got, want)
		}
	}
	for y := -2001; y <= 2401; y++ {
		for m := 1; m <= 12; m++ {
			for d := 1; d <= daysIn(time.Month(m), y); d++ {
				check(y, m, d)
			}
		}
	}
	for y := -4713; y <= 294276; y += 997 {
		check(y, 2, daysIn(time.February, y))
		check(y, 12, 31)
	}
}

// FuzzParseTimestamptz checks the fast path for the common shape against
// the general parser: whatever the fast path accepts, the general parser
// accepts with the same instant.
func FuzzParseTimestamptz(f *testing.F) {
	for _, s := range []string{"2026-11-30 07:48:59.123456+00", "2026-11-30 13:18:59.5+05:30",
		"2024-02-29 23:59:59.999999-12", "2026-11-30 07:48:59+00", "2026-11-30 07:48:59.1234567+00",
		"0001-01-01 00:00:00+00 BC", "2026-11-30 07:48:59+00:19:32", "2026-11-3a 07:48:59+00",
		"2026-11-30 07:48:59.+00", "2026/11-30 07:48:59+00", "2026-11-30 07:48:59.12-00:0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		fast, ok := parseCommonTimestamptz(s)
		if !ok {
			return
		}
		slow, ok := parseAnyTimestamptz(s)
		if !ok || !fast.Equal(slow) || fast.Location() != time.UTC {
			t.Fatalf("%q: fast path %v, general parser %v (ok %v)", s, fast, slow, ok)
		}
	})
}
