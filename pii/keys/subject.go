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

// DataKey returns the subject's key for topic, to decrypt: ErrErased when
// it has none (erased, or never had one). It never creates a key.
func (s *Store) DataKey(ctx context.Context, topic string, sub envelope.Subject) (tink.AEAD, error) {
	k := cacheKey{topic: topic, sub: sub}
	if c, ok := s.cache.Get(k); ok {
		if c.aead == nil {
			return nil, ErrErased
		}
		return c.aead, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wrapped, err := s.readKey(ctx, topic, sub)
	if errors.Is(err, pgx.ErrNoRows) {
		s.cache.Add(k, cached{})
		return nil, ErrErased
	}
	if err != nil {
		return nil, err
	}
	a, err := s.unwrap(topic, sub, wrapped)
	if err != nil {
		return nil, err
	}
	s.cache.Add(k, cached{aead: a})
	return a, nil
}

// SealKey returns the key to encrypt a value of the subject that was
// written at written (the event's occurred_at or commit time, the
// earlier): its key for topic, created when it has none (once, whatever
// the number of relays asking at once, and committed before SealKey
// returns). When the subject was erased (in topic, or in every topic)
// after written, it is ErrErased and no key is used or created: a value
// written before an erasure never gets a key that outlives it, whichever
// relay, source or bootstrap meets it, and however late. A value written
// after the erasure gets a new key. A read-only store never creates one.
//
// erasedAt is the subject's latest erasure in topic (zero: none): the key
// serves values written at or after it only (a caller that keeps keys of
// its own checks it).
func (s *Store) SealKey(ctx context.Context, topic string, sub envelope.Subject, written time.Time) (a tink.AEAD, erasedAt time.Time, err error) {
	k := cacheKey{topic: topic, sub: sub}
	if c, ok := s.cache.Get(k); ok && c.sealing {
		if written.Before(c.erasedAt) {
			return nil, c.erasedAt, ErrErased
		}
		if c.aead != nil {
			return c.aead, c.erasedAt, nil
		}
	}
	if s.opts.ReadOnly {
		return nil, time.Time{}, ErrErased
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wrapped, erasedAt, err := s.readSealKey(ctx, topic, sub)
	if err == nil && wrapped == nil && !written.Before(erasedAt) {
		if err = s.createKey(ctx, topic, sub, written); err == nil {
			wrapped, erasedAt, err = s.readSealKey(ctx, topic, sub)
		}
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	if wrapped != nil {
		if a, err = s.unwrap(topic, sub, wrapped); err != nil {
			return nil, time.Time{}, err
		}
	}
	s.cache.Add(k, cached{aead: a, sealing: true, erasedAt: erasedAt})
	if a == nil || written.Before(erasedAt) {
		return nil, erasedAt, ErrErased
	}
	return a, erasedAt, nil
}

func (s *Store) unwrap(topic string, sub envelope.Subject, wrapped []byte) (tink.AEAD, error) {
	h, err := keyset.ReadWithAssociatedData(keyset.NewBinaryReader(bytes.NewReader(wrapped)), s.wrap, dataKeyAD(topic, sub))
	if err != nil {
		return nil, fmt.Errorf("a data key of topic %q in %s does not open under the root key (the row was altered or moved): %w", topic, s.where, err)
	}
	a, err := dataKeyAEAD(h)
	if err != nil {
		return nil, fmt.Errorf("data key of topic %q: %w", topic, err)
	}
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

// readSealKey reads the subject's key of topic (nil: none) and its latest
// erasure in topic or every topic (zero: never erased).
func (s *Store) readSealKey(ctx context.Context, topic string, sub envelope.Subject) (wrapped []byte, erasedAt time.Time, err error) {
	var at *time.Time
	err = s.pool.QueryRow(ctx, `SELECT (SELECT wrapped FROM deltabus.subject_keys WHERE subject = $1 AND topic = $2),
		(SELECT max(erased_at) FROM deltabus.erased_subjects WHERE subject = $1 AND topic IN ($2, ''))`, sub[:], topic).Scan(&wrapped, &at)
	if err != nil {
		return nil, time.Time{}, s.tableError("read", "deltabus.subject_keys and deltabus.erased_subjects", err)
	}
	if at != nil {
		erasedAt = *at
	}
	return wrapped, erasedAt, nil
}

// subjectLock is the advisory lock that orders a subject's key creations
// and erasures: (class, the hash's first four bytes). A collision of two
// subjects only makes one wait for the other.
const subjectLockClass = 0x64627573 // "dbus"

func subjectLock(sub envelope.Subject) int32 {
	return int32(uint32(sub[0])<<24 | uint32(sub[1])<<16 | uint32(sub[2])<<8 | uint32(sub[3]))
}

// createKey creates the subject's key of topic unless an erasure of the
// subject after written forbids it (the caller reads again either way).
// It holds the subject's lock, so an erasure either sees the key and
// deletes it, or is seen here.
func (s *Store) createKey(ctx context.Context, topic string, sub envelope.Subject, written time.Time) error {
	wrapped, err := newWrapped(aead.AES256GCMNoPrefixKeyTemplate(), s.wrap, dataKeyAD(topic, sub))
	if err != nil {
		return err
	}
	// synchronous_commit on (Open): committed and flushed, on the
	// synchronous standbys too when the server names any, when Commit
	// returns. A concurrent relay's insert wins or loses here; either way
	// the read that follows reads the one key.
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(subjectLockClass), subjectLock(sub)); err != nil {
			return err
		}
		var at *time.Time
		if err := tx.QueryRow(ctx, "SELECT max(erased_at) FROM deltabus.erased_subjects WHERE subject = $1 AND topic IN ($2, '')", sub[:], topic).Scan(&at); err != nil {
			return err
		}
		if at != nil && written.Before(*at) {
			return nil
		}
		_, err := tx.Exec(ctx, "INSERT INTO deltabus.subject_keys (subject, topic, wrapped) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
			sub[:], topic, wrapped)
		return err
	})
	if err != nil {
		return s.tableError("insert into", "deltabus.subject_keys", err)
	}
	return nil
}

// Delete erases the subject's keys: of every topic, or of one. In one
// transaction under the subject's lock it records the erasure (in
// deltabus.erased_subjects: no key is created again for a value written
// before it, SealKey) and deletes the keys. It returns the topics whose
// key it deleted, and drops them from the cache.
func (s *Store) Delete(ctx context.Context, sub envelope.Subject, topic string) ([]string, error) {
	q, args := "DELETE FROM deltabus.subject_keys WHERE subject = $1 RETURNING topic", []any{sub[:]}
	if topic != "" {
		q, args = "DELETE FROM deltabus.subject_keys WHERE subject = $1 AND topic = $2 RETURNING topic", []any{sub[:], topic}
	}
	var topics []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(subjectLockClass), subjectLock(sub)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO deltabus.erased_subjects (subject, topic, erased_at) VALUES ($1, $2, clock_timestamp())
			ON CONFLICT (subject, topic) DO UPDATE SET erased_at = EXCLUDED.erased_at`, sub[:], topic); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		topics, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, s.tableError("erase in", "deltabus.subject_keys and deltabus.erased_subjects", err)
	}
	s.Forget("", sub)
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
