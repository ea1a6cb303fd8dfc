package keys

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/aead/aesgcm"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"

	"github.com/deltabus/deltabus/pii/envelope"
)

// Domains of the keyed hash.
const (
	domainSubject = "deltabus-subject-v1\x00"
	domainKey     = "deltabus-key-v1\x00"
)

// SubjectHash returns the keyed hash of a subject's id (the id's text: a
// JSON string's value, or a JSON number's literal).
func (s *Store) SubjectHash(id []byte) (envelope.Subject, error) {
	if sub, ok := s.hashes.Get(string(id)); ok {
		return sub, nil
	}
	sub, err := s.subjectHash(id)
	if err == nil {
		s.hashes.Add(string(id), sub)
	}
	return sub, err
}

func (s *Store) subjectHash(id []byte) (envelope.Subject, error) {
	var sub envelope.Subject
	in := make([]byte, 0, len(domainSubject)+len(id))
	in = append(append(in, domainSubject...), id...)
	out, err := s.prf.ComputePrimaryPRF(in, envelope.SubjectLen)
	if err != nil {
		return sub, fmt.Errorf("hash a subject id: %w", err)
	}
	copy(sub[:], out)
	return sub, nil
}

// PseudonymPrefix starts every pseudonymised key.
const PseudonymPrefix = "pk1:"

// PseudonymizeKey returns the keyed hash that replaces a topic's key:
// "pk1:" and 22 characters of base64url. Equal keys of a topic get equal
// pseudonyms, so per-key order and compaction by key still work.
func (s *Store) PseudonymizeKey(topic, key string) (string, error) {
	in := make([]byte, 0, len(domainKey)+len(topic)+1+len(key))
	in = append(append(append(append(in, domainKey...), topic...), 0), key...)
	out, err := s.prf.ComputePrimaryPRF(in, 16)
	if err != nil {
		return "", fmt.Errorf("pseudonymise a key: %w", err)
	}
	return PseudonymPrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// DataKey returns the subject's key for topic. With create, a missing key
// is created (once, whatever the number of relays asking at once) and
// committed before DataKey returns; without, a missing key is ErrErased.
func (s *Store) DataKey(ctx context.Context, topic string, sub envelope.Subject, create bool) (tink.AEAD, error) {
	k := cacheKey{topic: topic, sub: sub}
	if c, ok := s.cache.Get(k); ok && (c.aead != nil || !create) {
		if c.aead == nil {
			return nil, ErrErased
		}
		return c.aead, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wrapped, err := s.readKey(ctx, topic, sub)
	if errors.Is(err, pgx.ErrNoRows) && create && !s.opts.ReadOnly {
		if err = s.createKey(ctx, topic, sub); err == nil {
			wrapped, err = s.readKey(ctx, topic, sub)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		s.cache.Add(k, cached{})
		return nil, ErrErased
	}
	if err != nil {
		return nil, err
	}
	h, err := keyset.ReadWithAssociatedData(keyset.NewBinaryReader(bytes.NewReader(wrapped)), s.wrap, dataKeyAD(topic, sub))
	if err != nil {
		return nil, fmt.Errorf("a data key of topic %q in %s does not open under the root key (the row was altered or moved): %w", topic, s.where, err)
	}
	a, err := dataKeyAEAD(h)
	if err != nil {
		return nil, fmt.Errorf("data key of topic %q: %w", topic, err)
	}
	s.cache.Add(k, cached{aead: a})
	return a, nil
}

// dataKeyAEAD is the AEAD of a data key's keyset. A keyset of one enabled
// AES-GCM key, as createKey writes, gets that key's Tink primitive itself
// (aesgcm.NewAEAD: the same ciphertexts, output prefix included): every
// seal is then one call, not three through the keyset wrapper and its
// no-op monitoring logger, on the hot path of every personal field. Any
// other keyset gets the wrapper.
func dataKeyAEAD(h *keyset.Handle) (tink.AEAD, error) {
	if h.Len() == 1 {
		if e, err := h.Primary(); err == nil && e.KeyStatus() == keyset.Enabled {
			if k, ok := e.Key().(*aesgcm.Key); ok {
				return aesgcm.NewAEAD(k)
			}
		}
	}
	return aead.New(h)
}

func (s *Store) readKey(ctx context.Context, topic string, sub envelope.Subject) ([]byte, error) {
	var wrapped []byte
	err := s.pool.QueryRow(ctx, "SELECT wrapped FROM deltabus.subject_keys WHERE subject = $1 AND topic = $2", sub[:], topic).Scan(&wrapped)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, s.tableError("read", "deltabus.subject_keys", err)
	}
	return wrapped, err
}

func (s *Store) createKey(ctx context.Context, topic string, sub envelope.Subject) error {
	wrapped, err := newWrapped(aead.AES256GCMNoPrefixKeyTemplate(), s.wrap, dataKeyAD(topic, sub))
	if err != nil {
		return err
	}
	// Autocommit with synchronous_commit on (Open): committed and flushed
	// when Exec returns. A concurrent relay's insert wins or loses here;
	// either way the SELECT that follows reads the one key.
	_, err = s.pool.Exec(ctx, "INSERT INTO deltabus.subject_keys (subject, topic, wrapped) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
		sub[:], topic, wrapped)
	if err != nil {
		return s.tableError("insert into", "deltabus.subject_keys", err)
	}
	return nil
}

// Delete erases the subject's keys: of every topic, or of one. It returns
// the topics whose key it deleted, and drops them from the cache.
func (s *Store) Delete(ctx context.Context, sub envelope.Subject, topic string) ([]string, error) {
	q, args := "DELETE FROM deltabus.subject_keys WHERE subject = $1 RETURNING topic", []any{sub[:]}
	if topic != "" {
		q, args = "DELETE FROM deltabus.subject_keys WHERE subject = $1 AND topic = $2 RETURNING topic", []any{sub[:], topic}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.tableError("delete from", "deltabus.subject_keys", err)
	}
	topics, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.tableError("delete from", "deltabus.subject_keys", err)
	}
	for _, t := range topics {
		s.Forget(t, sub)
	}
	return topics, nil
}

// Forget drops the subject's key of topic from the cache ("" for every
// topic the cache holds of it).
func (s *Store) Forget(topic string, sub envelope.Subject) {
	s.generation.Add(1)
	if topic != "" {
		s.cache.Remove(cacheKey{topic: topic, sub: sub})
		return
	}
	for _, k := range s.cache.Keys() {
		if k.sub == sub {
			s.cache.Remove(k)
		}
	}
}

// CacheLen is the number of keys (and erasures) cached.
func (s *Store) CacheLen() int { return s.cache.Len() }

// Generation changes whenever a key is forgotten or deleted: a caller that
// keeps keys of its own (a Protector's per-goroutine cache) drops them
// when it changes.
func (s *Store) Generation() uint64 { return s.generation.Load() }
