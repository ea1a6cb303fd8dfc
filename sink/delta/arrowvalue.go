package delta

import (
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// arrowValue converts element i of arr to a plain Go value: nil, bool,
// int64, uint64, float32, float64, string, []byte, time.Time (timestamps,
// UTC), Date (dates), Decimal, []any (lists), map[string]any (structs and
// string-keyed maps) or []any of {"key","value"} maps (other maps).
func arrowValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return int64(a.Value(i))
	case *array.Uint16:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...)
	case *array.LargeBinary:
		return append([]byte(nil), a.Value(i)...)
	case *array.FixedSizeBinary:
		return append([]byte(nil), a.Value(i)...)
	case *array.Date32:
		return Date{a.Value(i).ToTime().UTC()}
	case *array.Date64:
		return Date{a.Value(i).ToTime().UTC()}
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC()
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return Decimal(a.Value(i).ToString(scale))
	case *array.Decimal256:
		scale := a.DataType().(*arrow.Decimal256Type).Scale
		return Decimal(a.Value(i).ToString(scale))
	case *array.Map:
		return mapValue(a, i)
	case *array.List:
		start, end := a.ValueOffsets(i)
		return listValue(a.ListValues(), int(start), int(end))
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		return listValue(a.ListValues(), int(start), int(end))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for j := 0; j < a.NumField(); j++ {
			m[st.Field(j).Name] = arrowValue(a.Field(j), i)
		}
		return m
	case *array.Dictionary:
		return arrowValue(a.Dictionary(), a.GetValueIndex(i))
	}
	return fmt.Sprintf("<unsupported %s>", arr.DataType())
}

func listValue(values arrow.Array, start, end int) []any {
	out := make([]any, 0, end-start)
	for j := start; j < end; j++ {
		out = append(out, arrowValue(values, j))
	}
	return out
}

func mapValue(a *array.Map, i int) any {
	start, end := a.ValueOffsets(i)
	keys, items := a.Keys(), a.Items()
	if _, ok := keys.(*array.String); ok {
		m := make(map[string]any, end-start)
		for j := int(start); j < int(end); j++ {
			m[keys.(*array.String).Value(j)] = arrowValue(items, j)
		}
		return m
	}
	out := make([]any, 0, end-start)
	for j := int(start); j < int(end); j++ {
		out = append(out, map[string]any{"key": arrowValue(keys, j), "value": arrowValue(items, j)})
	}
	return out
}

// Date is a calendar date; it encodes to JSON as "yyyy-mm-dd".
type Date struct{ time.Time }

// String returns the date as yyyy-mm-dd.
func (d Date) String() string { return d.Format(time.DateOnly) }

// MarshalJSON encodes the date as a "yyyy-mm-dd" string.
func (d Date) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Decimal is an exact decimal number in its text form ("12.30"); it encodes
// to JSON as a string so no consumer rounds it through float64.
type Decimal string

// jsonSafe replaces values encoding/json cannot encode (NaN, ±Inf) by strings.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprint(x)
		}
	case []any:
		for i := range x {
			x[i] = jsonSafe(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jsonSafe(x[k])
		}
	}
	return v
}
