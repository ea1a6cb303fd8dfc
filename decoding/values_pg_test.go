package decoding

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pgx/v5"
)

// pgZones cover whole-hour, half- and quarter-hour, negative, +14 and
// historical local-mean-time offsets (seconds in the offset).
var pgZones = []string{"UTC", "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam", "Pacific/Chatham",
	"Asia/Kathmandu", "America/Los_Angeles", "Pacific/Kiritimati", "Etc/GMT+12", "Africa/Monrovia"}

var pgTimestamps = []string{
	"2026-11-30 07:48:59.123456+00", "2026-11-30 07:48:59+00", "2026-11-30 07:48:59.1+00",
	"2026-11-30 07:48:59.000001+00", "1970-01-01 00:00:00+00", "1969-12-31 23:59:59.999999+00",
	"2000-01-01 00:00:00+00", "1900-01-01 00:00:00+00", "1847-12-01 00:00:00+00", "1800-06-01 12:00:00+00",
	"2024-02-29 12:00:00+00", "2026-03-29 01:30:00+00", "2026-10-25 00:59:59.999999+00",
	"9999-12-31 23:59:59.999999+00", "10000-01-01 00:00:00+00", "294276-12-30 23:59:59.999999+00",
	"0001-01-01 00:00:00+00", "0001-01-01 00:00:00+00 BC", "0044-03-15 12:00:00+00 BC",
	"4713-11-25 00:00:00+00 BC", "infinity", "-infinity",
}

// TestParseTimestamptzAgainstPostgres parses PostgreSQL's own ISO output of
// many instants in many time zones and compares with the exact epoch
// PostgreSQL reports for each.
func TestParseTimestamptzAgainstPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	ctx := context.Background()
	random := make([]int64, 300) // microseconds around 2000-01-01: 1800 to 2200
	for i := range random {
		random[i] = rand.Int64N(200*365*86400*1_000_000*2) - 200*365*86400*1_000_000
	}
	// The epoch is taken relative to 2000-01-01, PostgreSQL's own epoch: an
	// interval from 1970 overflows near the end of the range.
	const query = `SELECT ts::text, extract(epoch FROM ts - timestamptz '2000-01-01 00:00:00+00')::text
		FROM (SELECT b::timestamptz + o * interval '1 microsecond' AS ts FROM unnest($1::text[], $2::bigint[]) AS u(b, o)) v`
	checked := 0
	for _, zone := range pgZones {
		if _, err := conn.Exec(ctx, "SET DateStyle = ISO; SET TimeZone = '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		for _, in := range pgTimestamps {
			var txt, epoch string
			if err := conn.QueryRow(ctx, query, []string{in}, []int64{0}).Scan(&txt, &epoch); err != nil {
				continue // outside what PostgreSQL can show in this zone
			}
			checked++
			checkTimestamptz(t, zone, txt, epoch)
		}
		bases := make([]string, len(random))
		for i := range bases {
			bases[i] = "2000-01-01 00:00:00+00"
		}
		rows, err := conn.Query(ctx, query, bases, random)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var txt, epoch string
			if err := rows.Scan(&txt, &epoch); err != nil {
				t.Fatal(err)
			}
			checked++
			checkTimestamptz(t, zone, txt, epoch)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if min := len(pgZones) * (len(pgTimestamps) + len(random) - 4); checked < min {
		t.Fatalf("PostgreSQL showed only %d values, want at least %d", checked, min)
	}
}

var typeMapForTests = NewDecoder().TypeMap()

// checkTimestamptz checks ParseTimestamptz and DecodeValue on txt against
// epoch, PostgreSQL's exact seconds since 2000-01-01 UTC.
func checkTimestamptz(t *testing.T, zone, txt, epoch string) {
	t.Helper()
	got, err := ParseTimestamptz([]byte(txt))
	col := Column{Name: "occurred_at", TypeOID: 1184, TypeMod: -1}
	v, decErr := DecodeValue(typeMapForTests, col, text(txt))
	if txt == "infinity" || txt == "-infinity" {
		if !errors.Is(err, ErrInfinity) {
			t.Errorf("%s: ParseTimestamptz(%q) error = %v, want ErrInfinity", zone, txt, err)
		}
		return
	}
	want := epochTime(t, epoch).Add(946684800 * time.Second)
	if err != nil || !got.Equal(want) {
		t.Errorf("%s: ParseTimestamptz(%q) = %v, %v; PostgreSQL epoch %s is %v", zone, txt, got, err, epoch, want)
	}
	if vt, ok := v.(time.Time); decErr != nil || !ok || !vt.Equal(want) {
		t.Errorf("%s: DecodeValue(%q) = %v, %v; want %v", zone, txt, v, decErr, want)
	}
}

// epochTime converts an exact numeric epoch text ("-12.5") to a time.
func epochTime(t *testing.T, s string) time.Time {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		t.Fatalf("epoch %q: %v", s, err)
	}
	frac = (frac + "000000000")[:9]
	ns, _ := strconv.ParseInt(frac, 10, 64)
	if neg {
		sec, ns = -sec, -ns
	}
	return time.Unix(sec, ns).UTC()
}

func TestParseIntAgainstPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	rows, err := conn.Query(context.Background(), `SELECT v::text, v FROM (VALUES
		((-32768)::int2::int8), (32767::int2), ((-2147483648)::int4), (2147483647::int4), (0), (-1), (42),
		((-9223372036854775808)::int8), (9223372036854775807::int8)) AS t(v)`)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]any, error) {
		var s string
		var v int64
		err := r.Scan(&s, &v)
		return [2]any{s, v}, err
	})
	if err != nil || len(pairs) != 9 {
		t.Fatalf("rows: %v, %v", pairs, err)
	}
	for _, p := range pairs {
		if got, err := ParseInt64([]byte(p[0].(string))); err != nil || got != p[1].(int64) {
			t.Errorf("ParseInt64(%q) = %d, %v; want %d", p[0], got, err, p[1])
		}
	}
}
