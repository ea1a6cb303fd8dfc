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
	"github.com/hashicorp/go-retryablehttp"
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

	// HTTPTimeout bounds one HTTP attempt including reading the response
	// body; 0 = 60s.
	HTTPTimeout time.Duration

	// HTTPRetries is how many times one HTTP request is retried after a
	// connection error, 429 or 5xx; 0 = 4, negative = no retries.
	HTTPRetries int

	// Transport is the HTTP transport under the retrying client; nil = the
	// SDK's default transport (honours AWS_CA_BUNDLE). Tests use it to
	// inject faults.
	Transport http.RoundTripper
}

const (
	defaultHTTPTimeout = 60 * time.Second
	defaultHTTPRetries = 4
	defaultRegion      = "us-east-1"
)

// S3 is a Store on an S3 bucket (or an S3-compatible server). See the
// package documentation for how PutIfAbsent resolves ambiguous outcomes.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string
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
	awsCfg, err := loadAWSConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("s3 store s3://%s/%s: %w", cfg.Bucket, prefix, err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		// Flexible checksums need aws-chunked trailers that many
		// S3-compatible servers lack; puts carry Content-MD5 instead.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, bucket: cfg.Bucket, prefix: prefix}, nil
}

func loadAWSConfig(ctx context.Context, cfg S3Config) (aws.Config, error) {
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
	awsCfg.HTTPClient = newHTTPClient(cfg, baseTransport(cfg, awsCfg))
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

// newHTTPClient returns an *http.Client that retries connection errors, 429
// and 5xx with capped exponential backoff. Request bodies are buffered by
// go-retryablehttp, so every attempt sends the whole body.
func newHTTPClient(cfg S3Config, transport http.RoundTripper) *http.Client {
	rc := retryablehttp.NewClient()
	timeout := cfg.HTTPTimeout
	if timeout <= 0 {
		timeout = defaultHTTPTimeout
	}
	rc.HTTPClient = &http.Client{Transport: transport, Timeout: timeout}
	rc.RetryMax = cfg.HTTPRetries
	switch {
	case cfg.HTTPRetries == 0:
		rc.RetryMax = defaultHTTPRetries
	case cfg.HTTPRetries < 0:
		rc.RetryMax = 0
	}
	rc.RetryWaitMin = 100 * time.Millisecond
	rc.RetryWaitMax = 5 * time.Second
	rc.Logger = retryLogger{slog.Default()}
	// Hand the last response (e.g. a 503 with its S3 error body) to the SDK
	// instead of replacing it with "giving up after N attempts".
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return rc.StandardClient()
}

// retryLogger adapts slog to go-retryablehttp, demoting its per-request
// chatter to debug and keeping retries visible as warnings.
type retryLogger struct{ l *slog.Logger }

func (r retryLogger) Error(msg string, kv ...any) { r.l.Warn("s3 http: "+msg, kv...) }
func (r retryLogger) Warn(msg string, kv ...any)  { r.l.Warn("s3 http: "+msg, kv...) }
func (r retryLogger) Info(msg string, kv ...any)  { r.l.Debug("s3 http: "+msg, kv...) }
func (r retryLogger) Debug(msg string, kv ...any) { r.l.Debug("s3 http: "+msg, kv...) }

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
