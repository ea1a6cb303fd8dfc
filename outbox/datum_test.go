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
		"2026-11-30 07:48:59.123456789+00": "2026-11-30T07:48:59.123456Z",
		"10000-01-01 00:00:00+00":          "10000-01-01T00:00:00Z",
		"2024-02-29 12:00:00+00":           "2024-02-29T12:00:00Z",
	}
	for in, want := range tests {
		got, err := parseTimestamp([]byte(in), false)
		if err != nil {
			t.Errorf("parseTimestamp(%q): %v", in, err)
			continue
		}
		if got.Location() != time.UTC || got.Format(time.RFC3339Nano) != want {
			t.Errorf("parseTimestamp(%q) = %s, want %s", in, got.Format(time.RFC3339Nano), want)
		}
	}
	for _, in := range []string{"", "infinity", "-infinity", "2026-11-30", "2026-13-01 00:00:00+00",
		"2026-02-30 00:00:00+00", "2026-11-30 07:48:59+0", "2026-11-30 07:48:59.+00",
		"2026-11-30 07:48:59.123456", "2026-11-30 24:00:00+00", "2026-11-30 07:48:59+05:3x", "30/11/2026 07:48:59 UTC"} {
		if got, err := parseTimestamp([]byte(in), false); err == nil {
			t.Errorf("parseTimestamp(%q) = %v, want error", in, got)
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
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5g", "0195c1a4+7b1e-7c3d-8e9f-0a1b2c3d4e5f",
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e-f", "-195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f", "0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5\xff"} {
		if isUUID([]byte(s)) {
			t.Errorf("isUUID(%q) = true", s)
		}
	}
}

func TestParseTimestampWithoutZone(t *testing.T) {
	buf := []byte("2026-11-30 07:48:59.5 and more")
	got, err := parseTimestamp(buf[:21], true)
	if err != nil || !got.Equal(time.Date(2026, 11, 30, 7, 48, 59, 5e8, time.UTC)) {
		t.Fatalf("parseTimestamp(without zone) = %v, %v", got, err)
	}
	if string(buf) != "2026-11-30 07:48:59.5 and more" {
		t.Fatalf("parseTimestamp wrote into its input: %q", buf)
	}
	if _, err := parseTimestamp([]byte("2026-11-30 07:48:59+00"), true); err == nil {
		t.Error("a timestamptz text in a timestamp column parsed")
	}
}
