package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/deltabus/deltabus/storage"
)

// Bucket is a fresh bucket on the test S3 server.
type Bucket struct {
	Endpoint  string // e.g. http://127.0.0.1:40123 (path-style addressing)
	Bucket    string
	Region    string
	AccessKey string
	SecretKey string
}

// S3Config returns a storage.S3Config for this bucket under prefix.
func (b *Bucket) S3Config(prefix string) storage.S3Config {
	return storage.S3Config{
		Bucket:       b.Bucket,
		Prefix:       prefix,
		Endpoint:     b.Endpoint,
		Region:       b.Region,
		UsePathStyle: true,
		AccessKey:    b.AccessKey,
		SecretKey:    b.SecretKey,
	}
}

// URL returns s3://bucket/prefix for storage.Open (with S3Options from
// Options).
func (b *Bucket) URL(prefix string) string {
	return "s3://" + b.Bucket + "/" + strings.Trim(prefix, "/")
}

// Options returns the storage.S3Options that reach this bucket.
func (b *Bucket) Options() storage.S3Options {
	return storage.S3Options{Endpoint: b.Endpoint, Region: b.Region, UsePathStyle: true,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey}
}

// Client returns a plain SDK client for the server (for inspecting buckets
// from tests without going through storage).
func (b *Bucket) Client() *s3.Client {
	return newClient(b.Endpoint, b.AccessKey, b.SecretKey)
}

func newClient(endpoint, access, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(endpoint),
		Region:                     Region,
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(access, secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// NewBucket creates a uniquely named bucket for the test (starting the
// shared server on first use). On an external server (DELTABUS_TEST_S3) the
// bucket is emptied and removed when the test passes; a started server's
// whole directory is removed by Run. It fails the test if no server can be
// started.
func NewBucket(t testing.TB) *Bucket {
	t.Helper()
	srv, err := getServer()
	if err != nil {
		t.Fatalf("s3test: no S3 server: %v", err)
	}
	b := &Bucket{Endpoint: srv.endpoint, Bucket: bucketName(t.Name()), Region: Region,
		AccessKey: srv.accessKey, SecretKey: srv.secretKey}
	client := b.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.Bucket)}); err != nil {
		t.Fatalf("s3test: create bucket %s on %s: %v", b.Bucket, b.Endpoint, err)
	}
	if srv.cmd == nil { // an external server outlives us: clean up
		t.Cleanup(func() {
			if !t.Failed() {
				removeBucket(t, client, b.Bucket)
			}
		})
	}
	return b
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// bucketName makes a valid bucket name (3-63 of [a-z0-9-]) from a test name
// plus a random suffix.
func bucketName(testName string) string {
	var rnd [4]byte
	rand.Read(rnd[:])
	base := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	return fmt.Sprintf("t-%s-%s", base, hex.EncodeToString(rnd[:]))
}

// removeBucket deletes every object and then the bucket (best effort).
func removeBucket(t testing.TB, client *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Logf("s3test: list %s for cleanup: %v", bucket, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				t.Logf("s3test: delete %s/%s: %v", bucket, aws.ToString(o.Key), err)
			}
		}
	}
	if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Logf("s3test: delete bucket %s: %v", bucket, err)
	}
}
