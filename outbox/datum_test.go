package outbox

import (
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	tests := map[string]string{
		"2026-11-30 07:48:59.123456+00":    "2026-11-30T07:48:59.123456Z",
		"2026-11-30 07:48:59+00":           "2026-11-30T07:48:59Z",
		"2026-11-30 07:48:59.1+00":         "2026-11-30T07:48:59.1Z",
		"2026-11-30 13:18:59.5+05:30":      "2026-11-30T07:48:59.5Z",
		"2026-11-30 00:00:00-08":           "2026-11-30T08:00:00Z",
		"1890-01-01 00:00:00+00:09:21":     "1889-12-31T23:50:39Z",
		"2026-11-30 07:48:59.123456":       "2026-11-30T07:48:59.123456Z", // timestamp without time zone
		"2026-11-30T07:48:59.123456789+00": "2026-11-30T07:48:59.123456Z",
		"2024-02-29 12:00:00+00":           "2024-02-29T12:00:00Z",
	}
	for in, want := range tests {
		got, err := parseTimestamp([]byte(in))
		if err != nil {
			t.Errorf("parseTimestamp(%q): %v", in, err)
			continue
		}
		if got.Location() != time.UTC || got.Format(time.RFC3339Nano) != want {
			t.Errorf("parseTimestamp(%q) = %s, want %s", in, got.Format(time.RFC3339Nano), want)
		}
	}
	for _, in := range []string{"", "infinity", "-infinity", "2026-11-30", "2026-13-01 00:00:00+00",
		"2026-02-30 00:00:00+00", "2026-11-30 07:48:59+0", "2026-11-30 07:48:59.+00", "0044-03-15 12:00:00+00 BC",
		"10000-01-01 00:00:00+00", "2026-11-30 24:00:00+00", "2026-11-30 07:48:59+05:3x", "30/11/2026 07:48:59 UTC"} {
		if got, err := parseTimestamp([]byte(in)); err == nil {
			t.Errorf("parseTimestamp(%q) = %v, want error", in, got)
		}
	}
}

func TestParseInt32(t *testing.T) {
	good := map[string]int32{"1": 1, "-7": -7, "+3": 3, "2147483647": 2147483647, "-2147483648": -2147483648, "007": 7}
	for in, want := range good {
		if got, err := parseInt32([]byte(in)); err != nil || got != want {
			t.Errorf("parseInt32(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "1.0", "2147483648", "-2147483649", "99999999999", "1e3", " 1"} {
		if got, err := parseInt32([]byte(in)); err == nil {
			t.Errorf("parseInt32(%q) = %d, want error", in, got)
		}
	}
}

func TestIsUUID(t *testing.T) {
	for _, s := range []string{"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f", "0195C1A4-7B1E-7C3D-8E9F-0A1B2C3D4E5F"} {
		if !isUUID([]byte(s)) {
			t.Errorf("isUUID(%q) = false", s)
		}
	}
	for _, s := range []string{"", "abc", "0195c1a47b1e7c3d8e9f0a1b2c3d4e5f", "{0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f}",
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5g", "0195c1a4+7b1e-7c3d-8e9f-0a1b2c3d4e5f"} {
		if isUUID([]byte(s)) {
			t.Errorf("isUUID(%q) = true", s)
		}
	}
}
