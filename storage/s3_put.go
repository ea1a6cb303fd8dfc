package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// maxPutAttempts bounds PutIfAbsent's own retries (409 conflicts and
// ambiguous failures whose read-back found nothing). Each attempt is one
// PutObject, itself retried by the HTTP layer.
const maxPutAttempts = 5

func (s *S3) putObject(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	return s.putBody(ctx, key, bytesPayload(data), ifAbsent)
}

// putBody is one PutObject of p. Every HTTP attempt re-reads p from its
// source (payload.replay), so nothing is copied into memory.
func (s *S3) putBody(ctx context.Context, key string, p payload, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          p.reader(),
		ContentLength: aws.Int64(p.size),
		// The server rejects a body that does not match (integrity check
		// understood by AWS and every S3-compatible server).
		ContentMD5: p.contentMD5(),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	for attempt := 1; ; attempt++ {
		_, err := s.client.PutObject(ctx, in, p.replay)
		if err == nil || apiCode(err) != codeLostFolder || attempt == maxPutAttempts {
			return err
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			return err
		}
		in.Body = p.reader()
	}
}

// codeLostFolder is what an S3 server backed by a file system (versitygw's
// posix backend) answers when a put's parent folder is removed under it: a
// delete of a folder's last object removes the folder, and a concurrent
// put into it fails. Nothing was written, so the put is tried again (a key
// that really is a folder fails the same way each time and is returned).
// AWS S3 never answers it.
const codeLostFolder = "ExistingObjectIsDirectory"

// PutIfAbsent implements Store with PutObject + "If-None-Match: *".
//
//   - 2xx: ours.
//   - 412 PreconditionFailed: an object exists, but it may be ours (the HTTP
//     layer retried a PUT whose first attempt landed), so read it back:
//     same bytes → nil, different → ErrExists, gone → try again.
//   - 409 ConditionalRequestConflict: a concurrent conditional write is in
//     flight; try again after a short backoff.
//   - other 4xx: definite failure, returned as is.
//   - anything else (timeout, connection error, 5xx): ambiguous; read back as
//     for 412, with "not found" meaning the PUT did not land: try again.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < maxPutAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("put-if-absent %q in %s: %w (after %v)", key, s, err, lastErr)
			}
		}
		err := s.putObject(ctx, key, data, true)
		if err == nil {
			return nil
		}
		lastErr = err
		switch classifyPut(ctx, err) {
		case putDefinite:
			return fmt.Errorf("put-if-absent %q in %s: %w", key, s, err)
		case putConflict:
			continue
		}
		if done, rerr := s.resolve(ctx, key, data); done {
			return rerr
		}
	}
	return fmt.Errorf("put-if-absent %q in %s: outcome unknown after %d attempts: %w", key, s, maxPutAttempts, lastErr)
}

// resolve reads key back after an ambiguous or 412 put. done=false means
// nothing is there and the put should be tried again. A read-back that
// fails too (after the HTTP layer's retries) ends the call: the service is
// unreachable, and another round would only double the time to fail.
func (s *S3) resolve(ctx context.Context, key string, data []byte) (done bool, err error) {
	got, err := s.get(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return true, fmt.Errorf("put-if-absent %q in %s: outcome unknown (the put failed, then reading the key back failed): %w", key, s, err)
	case bytes.Equal(got, data):
		return true, nil
	default:
		return true, fmt.Errorf("put-if-absent %q in %s: %w", key, s, ErrExists)
	}
}

type putOutcome int

const (
	putAmbiguous putOutcome = iota // may or may not have landed: read back
	putExists                      // 412: something is there: read back
	putConflict                    // 409: retry
	putDefinite                    // did not land and retrying will not help
)

func classifyPut(ctx context.Context, err error) putOutcome {
	if ctx.Err() != nil {
		return putDefinite // cannot read back; caller retries to resolve
	}
	status := httpStatus(err)
	switch {
	case status == http.StatusPreconditionFailed || apiCode(err) == "PreconditionFailed":
		return putExists
	case status == http.StatusConflict:
		return putConflict
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		return putAmbiguous
	case status >= 400 && status < 500:
		return putDefinite
	}
	return putAmbiguous
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isS3NotFound reports NoSuchKey / 404 (but not NoSuchBucket).
func isS3NotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var nf *types.NotFound
	if errors.As(err, &nf) {
		return true
	}
	return httpStatus(err) == http.StatusNotFound && apiCode(err) != "NoSuchBucket"
}

func backoff(attempt int) time.Duration {
	return time.Duration(50<<min(attempt, 6)) * time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
