package relay

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config is everything `relay run` needs. Zero values take the defaults of
// DefaultConfig; Validate reports every problem, one line each.
type Config struct {
	Source      string // PostgreSQL DSN (DELTABUS_SOURCE)
	Store       string // file:///path or s3://bucket/prefix (DELTABUS_STORE)
	Slot        string // replication slot name
	Publication string // publication name
	AppID       string // Delta txn appId; default "deltabus-<slot>"

	BatchMaxEvents int           // close a batch after this many events
	BatchMaxBytes  int64         // ... or this many payload bytes
	BatchMaxDelay  time.Duration // ... or when its oldest event is this old
	StatusInterval time.Duration // standby status update period
	// ShutdownTimeout bounds how long a graceful stop waits for the source
	// transaction being received to end before discarding the batch.
	ShutdownTimeout time.Duration

	Standby     bool   // wait for the slot to be free instead of failing
	MetricsAddr string // host:port for /metrics and /healthz; "" disables
}

// DefaultConfig returns the defaults, tuned for sub-second end-to-end
// latency at thousands of events per second.
func DefaultConfig() Config {
	return Config{
		Slot:            "deltabus",
		Publication:     "deltabus",
		BatchMaxEvents:  50_000,
		BatchMaxBytes:   64 << 20,
		BatchMaxDelay:   50 * time.Millisecond,
		StatusInterval:  time.Second,
		ShutdownTimeout: 30 * time.Second,
	}
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Slot == "" {
		c.Slot = d.Slot
	}
	if c.Publication == "" {
		c.Publication = d.Publication
	}
	if c.AppID == "" {
		c.AppID = "deltabus-" + c.Slot
	}
	if c.BatchMaxEvents == 0 {
		c.BatchMaxEvents = d.BatchMaxEvents
	}
	if c.BatchMaxBytes == 0 {
		c.BatchMaxBytes = d.BatchMaxBytes
	}
	if c.BatchMaxDelay == 0 {
		c.BatchMaxDelay = d.BatchMaxDelay
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = d.StatusInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	return c
}

// Validate checks the configuration without touching the network. The
// returned error joins one line per problem, each saying how to fix it.
func (c Config) Validate() error {
	var errs []error
	if c.Source == "" {
		errs = append(errs, errors.New("no source database: set DELTABUS_SOURCE or --source to a PostgreSQL DSN (postgres://user@host:5432/db)"))
	} else if _, err := pgx.ParseConfig(c.Source); err != nil {
		errs = append(errs, fmt.Errorf("source DSN is invalid: %s; expected postgres://user@host:5432/db", redact(err.Error())))
	}
	if err := ValidateStoreURL(c.Store); err != nil {
		errs = append(errs, err)
	}
	if !slotName.MatchString(c.Slot) {
		errs = append(errs, fmt.Errorf("slot name %q is invalid: use 1-63 characters of a-z, 0-9 and _", c.Slot))
	}
	if c.Publication == "" {
		errs = append(errs, errors.New("publication name is empty: set --publication (default deltabus)"))
	}
	if c.BatchMaxEvents < 1 || c.BatchMaxBytes < 1 || c.BatchMaxDelay <= 0 {
		errs = append(errs, errors.New("batch limits must be positive (--batch-max-events, --batch-max-bytes, --batch-max-delay)"))
	}
	return errors.Join(errs...)
}

// ValidateStoreURL checks a store URL's form: file:///absolute/path or
// s3://bucket[/prefix].
func ValidateStoreURL(raw string) error {
	if raw == "" {
		return errors.New("no store: set DELTABUS_STORE or --store to file:///path or s3://bucket/prefix")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("store URL %q is invalid: %v; expected file:///path or s3://bucket/prefix", raw, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return fmt.Errorf("store URL %q is invalid: a file store needs an absolute path, e.g. file:///var/lib/deltabus", raw)
		}
	case "s3":
		if u.Host == "" {
			return fmt.Errorf("store URL %q is invalid: no bucket; expected s3://bucket/prefix", raw)
		}
	default:
		return fmt.Errorf("store URL %q has unsupported scheme %q: use file:///path or s3://bucket/prefix", raw, u.Scheme)
	}
	return nil
}

var (
	passwordInURL = regexp.MustCompile(`(://[^:/@\s]+:)[^@\s]*@`)
	passwordKV    = regexp.MustCompile(`(password=)\S+`)
)

// redact removes passwords from DSNs inside a message.
func redact(s string) string {
	s = passwordInURL.ReplaceAllString(s, "${1}xxxxx@")
	return passwordKV.ReplaceAllString(s, "${1}xxxxx")
}
