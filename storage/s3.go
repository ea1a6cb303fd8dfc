package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/go-cleanhttp"
)

// S3Config configures an S3 store.
type S3Config struct {
	Bucket string // required
	Prefix string // key prefix inside the bucket, no leading/trailing "/"; "" = bucket root

	// Endpoint is the base URL of an S3-compatible server, e.g.
	// "http://127.0.0.1:7070"; "" = AWS S3.
	Endpoint     string
	Region       string // "" = from the AWS config chain (AWS_REGION, ...), else "us-east-1"
	UsePathStyle bool   // bucket in the path, not the host name (most S3-compatible servers)

	// AccessKey and SecretKey are static credentials; when both are empty
	// the standard AWS credential chain is used (environment, shared files,
	// SSO, web identity, instance metadata).
	AccessKey string
	SecretKey string

	// HTTPTimeout is how long one HTTP attempt may make no progress before
	// it fails with a *StallError and is retried: connecting, handing the
	// request body to the connection, waiting for the response headers,
	// reading the response body. A transfer that keeps moving is never cut,
	// whatever its size. 0 = 30s. An unresponsive server therefore fails an
	// operation after about (HTTPRetries+1) × HTTPTimeout plus backoff
	// (2.5 min with the defaults); PutIfAbsent, which reads the key back
	// after an ambiguous failure, after up to twice that.
	HTTPTimeout time.Duration

	// HTTPRetries is how many times one HTTP request is retried after a
	// connection error, stall, 429 or 5xx; 0 = 4, negative = no retries.
	HTTPRetries int

	// Logger receives the warnings of retried requests (the first, then at
	// most one per 10s with the count of those not logged) and of failed
	// cleanups; nil = slog.Default().
	Logger *slog.Logger

	// Transport is the HTTP transport under the retrying client; nil = the
	// SDK's default transport (honours AWS_CA_BUNDLE). Tests use it to
	// inject faults.
	Transport http.RoundTripper
}

const (
	defaultHTTPTimeout = 30 * time.Second
	defaultHTTPRetries = 4
	defaultRegion      = "us-east-1"
)

// S3 is a Store on an S3 bucket (or an S3-compatible server). See the
// package documentation for how PutIfAbsent resolves ambiguous outcomes.
type S3 struct {
	client   *s3.Client
	bucket   string
	prefix   string
	log      *slog.Logger
	retryLog *retryLog
	partSize int64 // Commit uploads larger objects in parts of this size
}

var _ Store = (*S3)(nil)

// NewS3 returns a Store on cfg.Bucket under cfg.Prefix. It does not contact
// the service; the first operation reports bad credentials or a missing bucket.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	prefix := strings.Trim(cfg.Prefix, "/")
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: bucket is required")
	}
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 store prefix: %w", err)
		}
	}
	s := &S3{bucket: cfg.Bucket, prefix: prefix, log: cfg.Logger, partSize: defaultPartSize}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.retryLog = newRetryLog(s.log, s.String())
	awsCfg, err := loadAWSConfig(ctx, cfg, s.retryLog)
	if err != nil {
		return nil, fmt.Errorf("s3 store %s: %w", s, err)
	}
	s.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		// Flexible checksums need aws-chunked trailers that many
		// S3-compatible servers lack; puts carry Content-MD5 instead.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return s, nil
}

func loadAWSConfig(ctx context.Context, cfg S3Config, rlog *retryLog) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		// One retry layer only: go-retryablehttp's.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds := credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")
		opts = append(opts, config.WithCredentialsProvider(creds))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	awsCfg.HTTPClient = newHTTPClient(cfg, baseTransport(cfg, awsCfg), rlog)
	return awsCfg, nil
}

// baseTransport is cfg.Transport, else the SDK's own transport (which
// carries AWS_CA_BUNDLE and the SDK's timeouts), else a pooled transport.
func baseTransport(cfg S3Config, awsCfg aws.Config) http.RoundTripper {
	if cfg.Transport != nil {
		return cfg.Transport
	}
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		return bc.GetTransport()
	}
	return cleanhttp.DefaultPooledTransport()
}

// String returns s3://bucket/prefix.
func (s *S3) String() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

func (s *S3) fullKey(key string) string { return joinKey(s.prefix, key) }

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	data, err := s.get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %q from %s: %w", key, s, err)
	}
	return data, nil
}

func (s *S3) get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil {
		if isS3NotFound(err) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return data, nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.putObject(ctx, key, data, false); err != nil {
		return fmt.Errorf("put %q in %s: %w", key, s, err)
	}
	return nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil && !isS3NotFound(err) {
		return fmt.Errorf("delete %q from %s: %w", key, s, err)
	}
	return nil
}
