package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/prf"
	tinkpb "github.com/tink-crypto/tink-go/v2/proto/tink_go_proto"
	"github.com/tink-crypto/tink-go/v2/tink"

	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/usererr"
)

// Options tune a Store.
type Options struct {
	// CacheSize bounds the data keys kept unwrapped in memory (default
	// 100,000; about 1 KiB each).
	CacheSize int
	// CacheTTL bounds how long one stays (default 10 minutes): a consumer
	// that missed an erasure record stops decrypting within it.
	CacheTTL time.Duration
	// ReadOnly opens the store for reading keys (consumers): it never
	// creates the root or a data key.
	ReadOnly bool
	// MaxConns bounds the pool (default 4).
	MaxConns int32
}

func (o Options) withDefaults() Options {
	if o.CacheSize <= 0 {
		o.CacheSize = 100_000
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 10 * time.Minute
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	return o
}

// ErrErased: the subject has no key for the topic (erased, or never had one).
var ErrErased = errors.New("the subject's key is erased")

// Store reads and creates keys. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	where string // user@host:port/db, for messages
	kek   *KEK
	wrap  tink.AEAD
	prf   *prf.Set
	cache *expirable.LRU[cacheKey, cached]
	// hashes caches subject id -> hash (a hash never changes; an HMAC
	// costs more than the AES-GCM of a field).
	hashes     *expirable.LRU[string, envelope.Subject]
	generation atomic.Uint64 // see Generation
	opts       Options
}

type cacheKey struct {
	topic string
	sub   envelope.Subject
}

// cached is a key, or its absence (aead nil). sealing: read by SealKey,
// with erasedAt, the subject's latest erasure then (zero: none).
type cached struct {
	aead     tink.AEAD
	sealing  bool
	erasedAt time.Time
}

// Associated data of the wrapped keysets.
var (
	adWrap = []byte("deltabus-keys-v1 root wrap")
	adPRF  = []byte("deltabus-keys-v1 root prf")
)

func dataKeyAD(topic string, sub envelope.Subject) []byte {
	b := append([]byte("deltabus-keys-v1 subject\x00"), topic...)
	b = append(b, 0)
	return append(b, sub[:]...)
}

// Open connects to the key table at dsn and opens its root with kek,
// creating the root on first use unless opts.ReadOnly.
func Open(ctx context.Context, dsn string, kek *KEK, opts Options) (*Store, error) {
	s, err := connect(ctx, dsn, kek, opts)
	if err != nil {
		return nil, err
	}
	if err := s.openRoot(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if !opts.ReadOnly { // a writer reads the erasures before it creates a key (SealKey)
		if _, err := s.pool.Exec(ctx, "SELECT FROM deltabus.erased_subjects LIMIT 0"); err != nil {
			s.pool.Close()
			return nil, s.tableError("read", "deltabus.erased_subjects", err)
		}
	}
	return s, nil
}

func connect(ctx context.Context, dsn string, kek *KEK, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, usererr.New(err, "key table DSN (DELTABUS_KEYS) is invalid: %s", pgsource.Redact(err.Error()))
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on" // a key is durable before it is used
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = pgsource.ApplicationName() + " keys"
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgsource.DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, usererr.New(err, "key table: %s", pgsource.Redact(err.Error()))
	}
	s := &Store{pool: pool, where: pgsource.Describe(dsn), kek: kek, opts: opts,
		cache:  expirable.NewLRU[cacheKey, cached](opts.CacheSize, nil, opts.CacheTTL),
		hashes: expirable.NewLRU[string, envelope.Subject](opts.CacheSize, nil, opts.CacheTTL)}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

func (s *Store) openRoot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kekID, wrap, prfKS, err := s.readRoot(ctx)
	if errors.Is(err, pgx.ErrNoRows) && !s.opts.ReadOnly {
		if err = s.createRoot(ctx); err == nil {
			kekID, wrap, prfKS, err = s.readRoot(ctx)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return usererr.New(err, "the key table in %s has no root key yet: the relay creates it when it first meets personal data; start the relay first", s.where)
	}
	if err != nil {
		return err
	}
	wh, err := keyset.ReadWithAssociatedData(keyset.NewBinaryReader(bytes.NewReader(wrap)), s.kek, adWrap)
	if err != nil {
		return usererr.New(err, "DELTABUS_KEK (%s) cannot decrypt the key table's root key in %s, which %s wraps (%s): set DELTABUS_KEK to that KEK, or give its credentials kms:Decrypt",
			s.kek.ID, s.where, kekID, cause(err))
	}
	ph, err := keyset.ReadWithAssociatedData(keyset.NewBinaryReader(bytes.NewReader(prfKS)), s.kek, adPRF)
	if err != nil {
		return usererr.New(err, "DELTABUS_KEK (%s) cannot decrypt the key table's hash key in %s, which %s wraps (%s): set DELTABUS_KEK to that KEK",
			s.kek.ID, s.where, kekID, cause(err))
	}
	if s.wrap, err = aead.New(wh); err != nil {
		return fmt.Errorf("key root: %w", err)
	}
	if s.prf, err = prf.NewPRFSet(ph); err != nil {
		return fmt.Errorf("key root: %w", err)
	}
	return nil
}

func (s *Store) readRoot(ctx context.Context) (kekID string, wrap, prfKS []byte, err error) {
	err = s.pool.QueryRow(ctx, "SELECT kek, wrap, prf FROM deltabus.key_root WHERE id").Scan(&kekID, &wrap, &prfKS)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		err = s.tableError("read", "deltabus.key_root", err)
	}
	return
}

// createRoot inserts a new root unless another process did first.
func (s *Store) createRoot(ctx context.Context) error {
	wrap, err := newWrapped(aead.AES256GCMNoPrefixKeyTemplate(), s.kek, adWrap)
	if err == nil {
		var prfKS []byte
		if prfKS, err = newWrapped(prf.HMACSHA256PRFKeyTemplate(), s.kek, adPRF); err == nil {
			return s.insertRoot(ctx, wrap, prfKS)
		}
	}
	return usererr.New(err, "DELTABUS_KEK (%s) cannot wrap a new root key (%s): check that the key exists and its credentials may kms:Encrypt and kms:Decrypt",
		s.kek.ID, cause(err))
}

func (s *Store) insertRoot(ctx context.Context, wrap, prfKS []byte) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO deltabus.key_root (kek, wrap, prf) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
		s.kek.ID, wrap, prfKS)
	if err != nil {
		return s.tableError("insert into", "deltabus.key_root", err)
	}
	return nil
}

// newWrapped makes a new keyset from kt and returns it encrypted by by.
func newWrapped(kt *tinkpb.KeyTemplate, by tink.AEAD, ad []byte) ([]byte, error) {
	h, err := keyset.NewHandle(kt)
	if err != nil {
		return nil, fmt.Errorf("new keyset: %w", err)
	}
	var buf bytes.Buffer
	if err := h.WriteWithAssociatedData(keyset.NewBinaryWriter(&buf), by, ad); err != nil {
		return nil, fmt.Errorf("wrap a new keyset: %w", err)
	}
	return buf.Bytes(), nil
}

// tableError turns a failed statement on a key table into one line naming the fix.
func (s *Store) tableError(verb, table string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01", "3F000": // undefined_table, invalid_schema_name
			return usererr.New(err, "the key table %s is missing in %s: run `relay migrate` (with DELTABUS_KEYS set to that database when it is not the source)", table, s.where)
		case "42501": // insufficient_privilege
			return usererr.New(err, "the key table %s in %s: permission denied to %s it: grant the role what deploy/sql/roles.sql grants (relay: SELECT, INSERT on the keys, SELECT on erased_subjects; consumers: SELECT; erase: SELECT, DELETE on the keys, SELECT, INSERT, UPDATE on erased_subjects)", table, s.where, verb)
		}
	}
	if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return usererr.Retry(err, "the key table %s in %s did not answer in time: check that the database is up; events with personal data wait until it answers", table, s.where)
	}
	return usererr.Retry(err, "the key table %s in %s is unreachable: %s; events with personal data wait until it answers", table, s.where, pgsource.RootCause(err))
}

// cause is an error's innermost message, on one line and short.
func cause(err error) string {
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	return msg
}
