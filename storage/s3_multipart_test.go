package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// testPart is the smallest part size S3 accepts (5 MiB), used so tests
// reach multipart uploads with small objects.
const testPart = 5 << 20

// multipartS3 is a store on a fresh bucket with testPart-sized parts whose
// HTTP exchanges go through ft.
func multipartS3(t *testing.T, ft *faultTransport) (*storage.S3, *s3test.Bucket) {
	b := s3test.NewBucket(t)
	cfg := b.S3Config("p")
	cfg.Transport = ft
	s := newS3(t, cfg)
	storage.SetPartSize(s, testPart)
	return s, b
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

// commitObject writes data through Create in uneven pieces and commits.
func commitObject(ctx context.Context, s storage.Store, key string, data []byte) error {
	w, err := s.Create(ctx, key)
	if err != nil {
		return err
	}
	defer w.Abort()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 777_777)
		if _, err := w.Write(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return w.Commit(ctx)
}

func mustGetBytes(t *testing.T, s storage.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q): %d bytes differing from the %d written", key, len(got), len(want))
	}
}

// uploadsLeft lists the multipart uploads in progress in the bucket.
func uploadsLeft(t *testing.T, b *s3test.Bucket) []string {
	t.Helper()
	out, err := b.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(b.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}

// TestS3CommitSizes: one part or less is one PutObject; more is a
// multipart upload of full parts and a short last one.
func TestS3CommitSizes(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		want []string
	}{
		{"one part", testPart, []string{"PUT 200"}},
		{"two parts", 2 * testPart, []string{"CREATE 200", "PART 200", "PART 200", "COMPLETE 200"}},
		{"short last part", 2*testPart + 123, []string{"CREATE 200", "PART 200", "PART 200", "PART 200", "COMPLETE 200"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft := &faultTransport{}
			s, b := multipartS3(t, ft)
			data := randomBytes(c.size, uint64(c.size))
			if err := commitObject(t.Context(), s, "t/part-0.parquet", data); err != nil {
				t.Fatal(err)
			}
			ft.want(t, c.want...)
			mustGetBytes(t, s, "t/part-0.parquet", data)
			objs, err := s.List(t.Context(), "t/", "")
			if err != nil || len(objs) != 1 || objs[0].Size != int64(c.size) {
				t.Fatalf("List = %+v, %v; want one object of %d bytes", objs, err, c.size)
			}
			if left := uploadsLeft(t, b); len(left) != 0 {
				t.Fatalf("uploads left behind: %q", left)
			}
		})
	}
}

// TestS3PartRetryRereadsFile: a part whose first attempt was consumed and
// answered 500 is sent again, whole, from the temporary file.
func TestS3PartRetryRereadsFile(t *testing.T) {
	ft := &faultTransport{faultAny: func(req *http.Request, label string, n int, _ http.RoundTripper) (*http.Response, error) {
		if label != "PART" || n != 2 {
			return nil, nil
		}
		io.Copy(io.Discard, req.Body)
		return s3Error(req, http.StatusInternalServerError, "InternalError"), nil
	}}
	s, _ := multipartS3(t, ft)
	data := randomBytes(2*testPart+1, 1)
	if err := commitObject(t.Context(), s, "k", data); err != nil {
		t.Fatal(err)
	}
	ft.want(t, "CREATE 200", "PART 200", "PART 500", "PART 200", "PART 200", "COMPLETE 200")
	mustGetBytes(t, s, "k", data)
}

// TestS3MultipartFailureAborts: a part refused for good fails Commit, the
// upload is aborted and nothing is visible.
func TestS3MultipartFailureAborts(t *testing.T) {
	ft := &faultTransport{faultAny: func(req *http.Request, label string, n int, _ http.RoundTripper) (*http.Response, error) {
		if label == "PART" && n == 2 {
			return s3Error(req, http.StatusBadRequest, "InvalidRequest"), nil
		}
		return nil, nil
	}}
	s, b := multipartS3(t, ft)
	err := commitObject(t.Context(), s, "k", randomBytes(3*testPart, 2))
	if err == nil {
		t.Fatal("Commit with a refused part succeeded")
	}
	ft.want(t, "CREATE 200", "PART 200", "PART 400", "ABORT 204")
	if left := uploadsLeft(t, b); len(left) != 0 {
		t.Fatalf("uploads left behind: %q", left)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after failed Commit: %v, want ErrNotFound", err)
	}
}

// TestS3MultipartCanceledAborts: the caller's context ends mid-upload; the
// upload is still aborted.
func TestS3MultipartCanceledAborts(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	ft := &faultTransport{faultAny: func(req *http.Request, label string, n int, _ http.RoundTripper) (*http.Response, error) {
		if label == "PART" && n == 2 {
			cancel()
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return nil, nil
	}}
	s, b := multipartS3(t, ft)
	err := commitObject(ctx, s, "k", randomBytes(3*testPart, 3))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit canceled mid-upload: %v, want context.Canceled", err)
	}
	ft.want(t, "CREATE 200", "PART 200", "PART ERR", "ABORT 204")
	if left := uploadsLeft(t, b); len(left) != 0 {
		t.Fatalf("uploads left behind: %q", left)
	}
}

// landedThen forwards request number n of label (so it takes effect),
// discards the answer and returns fail's instead.
func landedThen(label string, n int, fail func(*http.Request) (*http.Response, error)) func(*http.Request, string, int, http.RoundTripper) (*http.Response, error) {
	return func(req *http.Request, l string, i int, next http.RoundTripper) (*http.Response, error) {
		if l != label || i != n {
			return nil, nil
		}
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return fail(req)
	}
}

// TestS3CompleteLandedThenConnError: the complete landed but its answer was
// lost and nothing retries it; the object's ETag proves the upload ours.
func TestS3CompleteLandedThenConnError(t *testing.T) {
	ft := &faultTransport{faultAny: landedThen("COMPLETE", 1, func(*http.Request) (*http.Response, error) {
		return nil, errConnReset
	})}
	b := s3test.NewBucket(t)
	cfg := b.S3Config("p")
	cfg.Transport, cfg.HTTPRetries = ft, -1
	s := newS3(t, cfg)
	storage.SetPartSize(s, testPart)
	data := randomBytes(2*testPart+5, 4)
	if err := commitObject(t.Context(), s, "k", data); err != nil {
		t.Fatalf("Commit whose complete landed: %v", err)
	}
	ft.want(t, "CREATE 200", "PART 200", "PART 200", "PART 200", "COMPLETE ERR", "HEAD 200")
	mustGetBytes(t, s, "k", data)
}

// TestS3CompleteLandedThen503: the HTTP layer retries the complete; the
// commit succeeds (versitygw answers a repeated complete 200, AWS may answer
// NoSuchUpload, which the read-back resolves).
func TestS3CompleteLandedThen503(t *testing.T) {
	ft := &faultTransport{faultAny: landedThen("COMPLETE", 1, func(req *http.Request) (*http.Response, error) {
		return s3Error(req, http.StatusServiceUnavailable, "ServiceUnavailable"), nil
	})}
	s, _ := multipartS3(t, ft)
	data := randomBytes(2*testPart+5, 5)
	if err := commitObject(t.Context(), s, "k", data); err != nil {
		t.Fatalf("Commit whose complete landed: %v", err)
	}
	mustGetBytes(t, s, "k", data)
}

// TestS3CompleteUploadGone: the upload vanished before its complete (aborted
// by a sweep): Commit fails and nothing is visible.
func TestS3CompleteUploadGone(t *testing.T) {
	var b *s3test.Bucket
	ft := &faultTransport{faultAny: func(req *http.Request, label string, n int, _ http.RoundTripper) (*http.Response, error) {
		if label == "COMPLETE" && n == 1 {
			_, err := b.Client().AbortMultipartUpload(req.Context(), &s3.AbortMultipartUploadInput{
				Bucket: aws.String(b.Bucket), Key: aws.String("p/k"), UploadId: aws.String(req.URL.Query().Get("uploadId"))})
			if err != nil {
				return nil, err
			}
		}
		return nil, nil
	}}
	s, bk := multipartS3(t, ft)
	b = bk
	if err := commitObject(t.Context(), s, "k", randomBytes(2*testPart, 6)); err == nil {
		t.Fatal("Commit of a vanished upload succeeded")
	}
	ft.want(t, "CREATE 200", "PART 200", "PART 200", "COMPLETE 404", "HEAD 404", "ABORT 404")
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after failed Commit: %v, want ErrNotFound", err)
	}
}
