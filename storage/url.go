package storage

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// IsS3 reports whether a store URL names an S3 store, read as Open reads
// it (the scheme without regard to case): the stores whose requests are
// network round trips, which the relay's defaults treat apart.
func IsS3(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "s3"
}

// CheckURL checks a store URL's form without touching the network:
// file:///absolute/path or s3://bucket[/prefix]. Its error is one line that
// says what to write instead.
func CheckURL(raw string) error {
	if raw == "" {
		return errors.New("no store: set DELTABUS_STORE or --store to file:///path or s3://bucket/prefix")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("store URL is invalid: %v; expected file:///path or s3://bucket/prefix", err)
	}
	if u.User != nil {
		return errors.New("store URL must not hold credentials: use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles, IAM roles)")
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
		return fmt.Errorf("store URL %q has unsupported scheme %q: use file:///path or s3://bucket/prefix", redactURL(raw), u.Scheme)
	}
	return nil
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return redact(u)
}
