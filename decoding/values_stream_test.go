package decoding

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/google/uuid"
)

// TestDecodeValueRealStream decodes one outbox row from two real streams,
// one in text format and one with binary 'true', and checks every column's
// DecodeValue against the values inserted.
func TestDecodeValueRealStream(t *testing.T) {
	db := pgtest.NewDB(t)
	db.Exec(t, outboxDDL)
	db.Exec(t, `CREATE PUBLICATION pub FOR TABLE outbox`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	textConn, textSlot := replSlot(t, ctx, db, "txt")
	binConn, binSlot := replSlot(t, ctx, db, "bin")
	occurred := time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)
	db.Exec(t, insertSQL, uuid1, "orders", "cust-1", `{"name": "Zoë \"the\" 🚀", "n": [1, 2.5]}`, nil, occurred)
	emitEnd(t, db)

	want := []any{
		[16]byte(uuid.MustParse(uuid1)), "orders", "cust-1", "OrderPlaced", int32(1),
		map[string]any{"name": "Zoë \"the\" 🚀", "n": []any{float64(1), 2.5}}, nil, occurred,
	}
	for _, c := range []struct {
		name string
		kind byte
		msgs []Message
	}{
		{"text", DatumText, decodeAll(t, ctx, textConn, textSlot, pgoutputArgs("pub"))},
		{"binary", DatumBinary, decodeAll(t, ctx, binConn, binSlot, pgoutputArgs("pub", "binary 'true'"))},
	} {
		if len(c.msgs) != 3 {
			t.Fatalf("%s: decoded %d messages, want begin, row, commit", c.name, len(c.msgs))
		}
		row := c.msgs[1].(*Row)
		m := NewDecoder().TypeMap()
		for i, col := range row.Relation.Columns {
			if d := row.New[i]; d.Kind != c.kind && d.Kind != DatumNull {
				t.Errorf("%s: column %s has kind %q", c.name, col.Name, d.Kind)
			}
			got, err := DecodeValue(m, col, row.New[i])
			if tm, ok := got.(time.Time); ok {
				got = tm.UTC()
			}
			if err != nil || !reflect.DeepEqual(got, want[i]) {
				t.Errorf("%s: column %s = %#v, %v; want %#v", c.name, col.Name, got, err, want[i])
			}
		}
	}
}
