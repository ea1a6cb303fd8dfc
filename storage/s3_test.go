package storage_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/storage/storagetest"
	"github.com/deltabus/deltabus/tests/s3test"
)

func newS3(t *testing.T, cfg storage.S3Config) *storage.S3 {
	t.Helper()
	s, err := storage.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3Conformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return newS3(t, s3test.NewBucket(t).S3Config(conformancePrefix))
	})
}

func TestS3NoPrefix(t *testing.T) {
	b := s3test.NewBucket(t)
	s := newS3(t, b.S3Config(""))
	if got, want := s.String(), "s3://"+b.Bucket; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	ctx := t.Context()
	for _, k := range []string{"b/x", "a", "b/a"} {
		if err := s.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := s.List(ctx, "b/", "b/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "b/x" {
		t.Fatalf("List(b/, b/a) = %+v, want [b/x]", objs)
	}
}

// TestS3ConditionalPutExisting412 is the integration check that versitygw
// (and so our client) speaks If-None-Match: a conditional PUT on an
// existing key is answered 412 and reported as ErrExists.
func TestS3ConditionalPutExisting412(t *testing.T) {
	rec := &faultTransport{}
	cfg := s3test.NewBucket(t).S3Config("p")
	cfg.Transport = rec
	s := newS3(t, cfg)
	key := "_delta_log/00000000000000000000.json"
	if err := s.PutIfAbsent(t.Context(), key, []byte("first")); err != nil {
		t.Fatal(err)
	}
	err := s.PutIfAbsent(t.Context(), key, []byte("second"))
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("PutIfAbsent on existing key: %v, want ErrExists", err)
	}
	rec.want(t, "PUT? 200", "PUT? 412", "GET 200")
	got, err := s.Get(t.Context(), key)
	if err != nil || string(got) != "first" {
		t.Fatalf("Get = %q, %v, want first", got, err)
	}
}

// TestS3BadCredentials: a definite client error (403) is returned as is,
// without a read-back and not as ErrExists.
func TestS3BadCredentials(t *testing.T) {
	rec := &faultTransport{}
	cfg := s3test.NewBucket(t).S3Config("")
	cfg.SecretKey = "wrong"
	cfg.Transport = rec
	s := newS3(t, cfg)
	err := s.PutIfAbsent(t.Context(), "k", []byte("x"))
	if err == nil || errors.Is(err, storage.ErrExists) {
		t.Fatalf("PutIfAbsent with a wrong secret: %v, want a plain error", err)
	}
	rec.want(t, "PUT? 403")
	if _, err := s.Get(t.Context(), "k"); err == nil || errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get with a wrong secret: %v, want an error other than ErrNotFound", err)
	}
}

func TestS3MissingBucket(t *testing.T) {
	b := s3test.NewBucket(t)
	b.Bucket += "-missing"
	s := newS3(t, b.S3Config(""))
	if _, err := s.Get(t.Context(), "k"); err == nil || errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: %v, want an error other than ErrNotFound", err)
	}
}

func TestS3ContextCanceledMidRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	ft := &faultTransport{fault: func(req *http.Request, n int, next http.RoundTripper) (*http.Response, error) {
		cancel()
		<-req.Context().Done()
		return nil, req.Context().Err()
	}}
	cfg := s3test.NewBucket(t).S3Config("")
	cfg.Transport = ft
	err := newS3(t, cfg).PutIfAbsent(ctx, "k", []byte("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PutIfAbsent canceled mid-request: %v, want context.Canceled", err)
	}
}

const conformancePrefix = "deltabus/root"

// leaveS3 is what an S3 writer killed mid-commit leaves: a multipart
// upload with one part, never completed nor aborted.
func leaveS3(b *s3test.Bucket) storagetest.Leftover {
	return func(t *testing.T, _ storage.Store, key string) {
		c, ctx := b.Client(), t.Context()
		full := aws.String(conformancePrefix + "/" + key)
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b.Bucket), Key: full})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(b.Bucket), Key: full, UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("partial " + key)})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestS3Sweep(t *testing.T) {
	var b *s3test.Bucket
	storagetest.RunSweep(t, func(t *testing.T) storage.Store {
		b = s3test.NewBucket(t)
		return newS3(t, b.S3Config(conformancePrefix))
	}, func(t *testing.T, s storage.Store, key string) { leaveS3(b)(t, s, key) })
}
