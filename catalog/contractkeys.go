package catalog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTypeSegment is the longest an encoded event type may be, in bytes:
// one key segment stays under the 255-byte file name limit of local file
// systems, with room to spare.
const MaxTypeSegment = 240

// versionDigits is the width of a contract version's key segment: zero
// padded, so that a listing returns versions in numeric order.
const versionDigits = 10

// EncodeType returns the key segment of an event type.
//
// Event types are whatever producers write in the outbox's type column
// ("OrderPlaced", "com.acme.orders/Placed", "order placed"), while a key
// segment must be safe on every store: no "/", never "." or "..", and no
// two names that differ only in case (local stores on case-insensitive
// file systems would make "OrderPlaced" and "orderplaced" one folder). The
// encoding keeps a-z, 0-9 and '-' (and '.', except first) as they are, so
// the common names stay readable; writes an upper-case letter as '_'
// followed by its lower-case form ("OrderPlaced" -> "_order_placed"), '_'
// as "__", and every other byte as "_-" and two lower-case hex digits ("/"
// -> "_-2f"). It is injective and DecodeType inverts it, so two types
// never share a segment. Hex or base32 of the whole name would be as safe
// but unreadable in a store listing; percent-encoding keeps upper case.
//
// A type is refused when it is empty, not valid UTF-8, holds a control
// character, or encodes to more than MaxTypeSegment bytes.
func EncodeType(typ string) (string, error) {
	if err := checkType(typ); err != nil {
		return "", err
	}
	var sb strings.Builder
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.' && i > 0:
			sb.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			sb.WriteByte('_')
			sb.WriteByte(c + 'a' - 'A')
		case c == '_':
			sb.WriteString("__")
		default:
			fmt.Fprintf(&sb, "_-%02x", c)
		}
	}
	if sb.Len() > MaxTypeSegment {
		return "", fmt.Errorf("event type %q is too long for a contract: %d bytes once encoded for the store, the limit is %d (a-z, 0-9, '.' and '-' count one byte, an upper-case letter or '_' two, any other byte four)",
			truncate(typ), sb.Len(), MaxTypeSegment)
	}
	return sb.String(), nil
}

func checkType(typ string) error {
	switch {
	case typ == "":
		return errors.New("event type is empty")
	case !utf8.ValidString(typ):
		return fmt.Errorf("event type %q is not valid UTF-8", truncate(typ))
	}
	for i, r := range typ {
		if unicode.IsControl(r) {
			return fmt.Errorf("event type %q holds a control character at byte %d", truncate(typ), i)
		}
	}
	return nil
}

// DecodeType is EncodeType's inverse; it refuses a segment EncodeType
// would not write.
func DecodeType(seg string) (string, error) {
	var sb strings.Builder
	bad := func() (string, error) { return "", fmt.Errorf("%q is not an encoded event type", truncate(seg)) }
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '_' {
			sb.WriteByte(c)
			continue
		}
		if i+1 >= len(seg) {
			return bad()
		}
		i++
		switch n := seg[i]; {
		case n >= 'a' && n <= 'z':
			sb.WriteByte(n - 'a' + 'A')
		case n == '_':
			sb.WriteByte('_')
		case n == '-' && i+2 < len(seg):
			b, err := strconv.ParseUint(seg[i+1:i+3], 16, 8)
			if err != nil {
				return bad()
			}
			sb.WriteByte(byte(b))
			i += 2
		default:
			return bad()
		}
	}
	typ := sb.String()
	if enc, err := EncodeType(typ); err != nil || enc != seg {
		return bad()
	}
	return typ, nil
}

// versionSegment returns the key segment of a contract version: a positive
// 32-bit integer, in decimal without leading zeros, padded to ten digits.
func versionSegment(v string) (string, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != v {
		return "", fmt.Errorf("contract version %q is invalid: want a positive integer up to 2147483647", truncate(v))
	}
	return fmt.Sprintf("%0*d", versionDigits, n), nil
}
