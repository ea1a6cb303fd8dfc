// Package envelope is the JSON form a personal value takes in a stored
// event: the value's JSON text encrypted with AEAD (AES-256-GCM, through
// Tink) under its data subject's key, bound to where it is.
//
// # Format, version 1
//
// A personal leaf of a payload is replaced by one JSON object, so the
// payload stays JSON and every reader without keys sees an object instead
// of the value:
//
//		{"x-deltabus-enc":1,"sub":"<subject>","ct":"<ciphertext>"}
//
//	  - "x-deltabus-enc" is the format version (1), and the key a reader
//	    recognises an envelope by; the object has exactly these three members,
//	    in this order.
//	  - "sub" is the keyed hash of the data subject's id (16 bytes,
//	    base64url without padding): the key table's row, and what `relay
//	    erase` counts stored envelopes by. It is a pseudonym, not the id.
//	  - "ct" is base64url (no padding) of the AEAD ciphertext of the leaf's
//	    JSON text exactly as the producer wrote it (a string keeps its
//	    quotes, so any JSON value comes back as it was): 12-byte nonce,
//	    ciphertext, 16-byte tag.
//	  - The associated data is AssociatedData(topic, event id, pointer):
//	    an envelope opens only in its own topic, event and place (RFC 6901
//	    pointer of the leaf in the payload, array indices included), so it
//	    cannot be copied into another event or field.
package envelope

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/tink-crypto/tink-go/v2/tink"
)

// Version is the envelope format written.
const Version = 1

// Marker is the member that identifies an envelope.
const Marker = "x-deltabus-enc"

// SubjectLen is the length of a subject hash.
const SubjectLen = 16

// Subject is the keyed hash of a data subject's id.
type Subject [SubjectLen]byte

// String is the base64url form written in envelopes.
func (s Subject) String() string { return base64.RawURLEncoding.EncodeToString(s[:]) }

// ParseSubject reads the base64url form.
func ParseSubject(s string) (Subject, error) {
	var sub Subject
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != SubjectLen {
		return sub, fmt.Errorf("envelope subject %q is not %d bytes of base64url", s, SubjectLen)
	}
	copy(sub[:], b)
	return sub, nil
}

const prefix = `{"` + Marker + `":1,"sub":"`

// AssociatedData binds a ciphertext to its topic, event and pointer.
func AssociatedData(dst []byte, topic, eventID, pointer string) []byte {
	dst = append(dst, "deltabus-pii-v1\x00"...)
	dst = append(dst, topic...)
	dst = append(dst, 0)
	dst = append(dst, eventID...)
	dst = append(dst, 0)
	return append(dst, pointer...)
}

// Seal appends the envelope of plaintext (a JSON value's text) to dst.
func Seal(dst []byte, a tink.AEAD, sub Subject, plaintext, ad []byte) ([]byte, error) {
	return NewSealer(a, sub).Seal(dst, plaintext, ad)
}

// A Sealer seals the values of one subject under one key: Seal without
// encoding the subject again for every value.
type Sealer struct {
	a    tink.AEAD
	head []byte // the envelope up to its ciphertext
}

// NewSealer returns the Sealer of sub's values under a.
func NewSealer(a tink.AEAD, sub Subject) Sealer {
	head := append(make([]byte, 0, len(prefix)+base64.RawURLEncoding.EncodedLen(SubjectLen)+len(ctMember)), prefix...)
	head = base64.RawURLEncoding.AppendEncode(head, sub[:])
	return Sealer{a: a, head: append(head, ctMember...)}
}

const ctMember = `","ct":"`

// Seal appends the envelope of plaintext (a JSON value's text) to dst.
func (s Sealer) Seal(dst, plaintext, ad []byte) ([]byte, error) {
	ct, err := s.a.Encrypt(plaintext, ad)
	if err != nil {
		return dst, fmt.Errorf("encrypt a personal field: %w", err)
	}
	dst = append(dst, s.head...)
	dst = base64.RawURLEncoding.AppendEncode(dst, ct)
	return append(dst, `"}`...), nil
}

// Envelope is a parsed envelope.
type Envelope struct {
	Subject    Subject
	Ciphertext []byte
}

// ErrNotEnvelope: the value is not an envelope.
var ErrNotEnvelope = errors.New("not a DeltaBus envelope")

// Is reports whether a JSON value's text looks like an envelope (any version).
func Is(value []byte) bool {
	return bytes.HasPrefix(value, []byte(`{"`+Marker+`":`))
}

// Parse reads an envelope of version 1 from a JSON value's text, as Seal
// writes it (whitespace-free; a consumer that re-serialised the payload
// must keep the member order).
func Parse(value []byte) (Envelope, error) {
	var e Envelope
	if !Is(value) {
		return e, ErrNotEnvelope
	}
	rest, ok := bytes.CutPrefix(value, []byte(prefix))
	if !ok {
		return e, fmt.Errorf("envelope of an unknown version (this reader knows version %d): %.40s", Version, value)
	}
	sub, rest, ok := bytes.Cut(rest, []byte(ctMember))
	if !ok {
		return e, errors.New("malformed envelope: no ciphertext")
	}
	ct, ok := bytes.CutSuffix(rest, []byte(`"}`))
	if !ok {
		return e, errors.New("malformed envelope: trailing bytes")
	}
	var err error
	if e.Subject, err = ParseSubject(string(sub)); err != nil {
		return e, err
	}
	if e.Ciphertext, err = base64.RawURLEncoding.DecodeString(string(ct)); err != nil {
		return e, fmt.Errorf("malformed envelope ciphertext: %w", err)
	}
	return e, nil
}

// Open decrypts an envelope's ciphertext: the leaf's JSON text.
func (e Envelope) Open(a tink.AEAD, ad []byte) ([]byte, error) {
	pt, err := a.Decrypt(e.Ciphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("decrypt a personal field: %w", err)
	}
	return pt, nil
}

// SubjectNeedle is the text by which a stored payload holds an envelope
// of sub: `"sub":"<subject>"`, for counting without decrypting.
func SubjectNeedle(sub Subject) []byte {
	return []byte(`"sub":"` + sub.String() + `"`)
}
