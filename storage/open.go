package storage

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// S3Options are the S3 settings Open does not take from the URL. Empty
// fields fall back to the environment:
//
//	DELTABUS_S3_ENDPOINT    Endpoint (S3-compatible server base URL)
//	DELTABUS_S3_PATH_STYLE  UsePathStyle when "true" (strconv.ParseBool)
//	AWS_REGION              Region (via the AWS config chain), else "us-east-1"
//	AWS_ACCESS_KEY_ID, ...  credentials via the standard AWS chain
type S3Options struct {
	Endpoint     string
	Region       string
	UsePathStyle bool
	AccessKey    string
	SecretKey    string
	HTTPTimeout  time.Duration // see S3Config.HTTPTimeout
	Logger       *slog.Logger  // see S3Config.Logger; nil = slog.Default()
}

// Open returns the Store a URL names:
//
//	file:///abs/path     Local rooted at /abs/path (created if missing)
//	s3://bucket/prefix   S3 on bucket under prefix ("" prefix = bucket root)
func Open(ctx context.Context, rawURL string, opts S3Options) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("open store %s: credentials, query and fragment are not allowed in the URL", redact(u))
	}
	switch u.Scheme {
	case "file":
		return openFile(u)
	case "s3":
		return openS3(ctx, u, opts)
	}
	return nil, fmt.Errorf("open store %q: unsupported scheme %q (want file:// or s3://)", rawURL, u.Scheme)
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

func openFile(u *url.URL) (Store, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("open store %s: file URL must be file:///abs/path (host %q)", u, u.Host)
	}
	if !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("open store %s: path %q is not absolute", u, u.Path)
	}
	l, err := NewLocal(filepath.Clean(u.Path))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return l, nil
}

func openS3(ctx context.Context, u *url.URL, opts S3Options) (Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("open store %s: missing bucket (want s3://bucket/prefix)", u)
	}
	cfg := S3Config{
		Bucket:       u.Host,
		Prefix:       strings.Trim(u.Path, "/"),
		Endpoint:     firstNonEmpty(opts.Endpoint, os.Getenv("DELTABUS_S3_ENDPOINT")),
		Region:       opts.Region,
		UsePathStyle: opts.UsePathStyle,
		AccessKey:    opts.AccessKey,
		SecretKey:    opts.SecretKey,
		HTTPTimeout:  opts.HTTPTimeout,
		Logger:       opts.Logger,
	}
	if v := os.Getenv("DELTABUS_S3_PATH_STYLE"); v != "" && !cfg.UsePathStyle {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("open store %s: DELTABUS_S3_PATH_STYLE=%q: %w", u, v, err)
		}
		cfg.UsePathStyle = b
	}
	s, err := NewS3(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
