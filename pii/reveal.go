package pii

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/pii/keys"
)

// Revealer decrypts the envelopes of stored payloads for a consumer that
// has the KEK and may read the key table. Safe for concurrent use.
type Revealer struct {
	keys *keys.Store
}

// NewRevealer returns a Revealer over a key table opened read-only.
func NewRevealer(ks *keys.Store) *Revealer { return &Revealer{keys: ks} }

// Keys returns the key table (to Forget keys at erasure records).
func (r *Revealer) Keys() *keys.Store { return r.keys }

var envMarker = `"` + envelope.Marker + `"`

// Reveal returns payload with every envelope replaced by its value, and
// the pointers of the fields whose subject is erased (those become null).
// A payload without envelopes is returned as is, without work. An
// envelope that does not open under its key (altered, or moved from
// another event or field) is an error naming the event and pointer.
func (r *Revealer) Reveal(ctx context.Context, topic, eventID, payload string) (string, []string, error) {
	if !strings.Contains(payload, envMarker) {
		return payload, nil, nil
	}
	b := readOnly(payload)
	var envs []span
	if err := findEnvelopes(b, &envs); err != nil {
		return "", nil, fmt.Errorf("event %s: %w", eventID, err)
	}
	var out []byte
	var erased []string
	var ad []byte
	last := 0
	for _, sp := range envs {
		out = append(out, b[last:sp.start]...)
		last = sp.end
		e, err := envelope.Parse(b[sp.start:sp.end])
		if err != nil {
			return "", nil, fmt.Errorf("event %s field %s: %w", eventID, sp.pointer, err)
		}
		a, err := r.keys.DataKey(ctx, topic, e.Subject, false)
		if errors.Is(err, keys.ErrErased) {
			out = append(out, "null"...)
			erased = append(erased, sp.pointer)
			continue
		}
		if err != nil {
			return "", nil, err
		}
		ad = envelope.AssociatedData(ad[:0], topic, eventID, sp.pointer)
		pt, err := e.Open(a, ad)
		if err != nil {
			return "", nil, fmt.Errorf("event %s field %s: the envelope does not open under its key (altered, or moved from another event or field): %w", eventID, sp.pointer, err)
		}
		out = append(out, pt...)
	}
	out = append(out, b[last:]...)
	return string(out), erased, nil
}

// findEnvelopes records every envelope in a JSON text, with its pointer.
func findEnvelopes(b []byte, envs *[]span) error {
	s := scanner{b: b}
	i := s.ws(0)
	end, err := s.walkAll(i, envs)
	if err != nil {
		return err
	}
	if s.ws(end) != len(b) {
		return errSyntax
	}
	return nil
}

// walkAll visits every value, recording envelopes.
func (s *scanner) walkAll(i int, envs *[]span) (int, error) {
	if i >= len(s.b) {
		return 0, errSyntax
	}
	switch s.b[i] {
	case '{':
		end, err := skip(s.b, i)
		if err != nil {
			return 0, err
		}
		if envelope.Is(s.b[i:end]) {
			*envs = append(*envs, span{start: i, end: end, pointer: s.pointer()})
			return end, nil
		}
		return s.members(i, envs)
	case '[':
		return s.elements(i, envs)
	}
	return skip(s.b, i)
}

func (s *scanner) members(i int, envs *[]span) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return 0, errSyntax
		}
		kend, err := skip(s.b, i)
		if err != nil {
			return 0, err
		}
		key, err := unquote(s.b[i:kend])
		if err != nil {
			return 0, err
		}
		i = s.ws(kend)
		if i >= len(s.b) || s.b[i] != ':' {
			return 0, errSyntax
		}
		s.toks = append(s.toks, []byte(key))
		if i, err = s.walkAll(s.ws(i+1), envs); err != nil {
			return 0, err
		}
		s.toks = s.toks[:len(s.toks)-1]
		var done bool
		if i, done, err = s.next(i, '}'); done || err != nil {
			return i, err
		}
	}
}

func (s *scanner) elements(i int, envs *[]span) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	for k := 0; ; k++ {
		s.toks = append(s.toks, strconv.AppendInt(nil, int64(k), 10))
		var err error
		if i, err = s.walkAll(i, envs); err != nil {
			return 0, err
		}
		s.toks = s.toks[:len(s.toks)-1]
		var done bool
		if i, done, err = s.next(i, ']'); done || err != nil {
			return i, err
		}
	}
}
