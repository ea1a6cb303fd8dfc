package storage_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/s3test"
)

// slowReader hands out at most 16 KiB per Read, each after a pause.
type slowReader struct {
	r     io.ReadCloser
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), 16<<10)])
}

func (s *slowReader) Close() error { return s.r.Close() }

// TestS3SlowTransferNotCut: an upload and a download that take several
// times HTTPTimeout but keep moving succeed on the first attempt; the
// timeout bounds silence, not duration.
func TestS3SlowTransferNotCut(t *testing.T) {
	const stall, pause = 300 * time.Millisecond, 20 * time.Millisecond
	ft := &faultTransport{faultAny: func(req *http.Request, label string, _ int, next http.RoundTripper) (*http.Response, error) {
		if label == "PUT" {
			req.Body = &slowReader{r: req.Body, pause: pause}
		}
		resp, err := next.RoundTrip(req)
		if err == nil && label == "GET" {
			resp.Body = &slowReader{r: resp.Body, pause: pause}
		}
		return resp, err
	}}
	cfg := s3test.NewBucket(t).S3Config("p")
	cfg.Transport, cfg.HTTPTimeout, cfg.HTTPRetries = ft, stall, -1
	s := newS3(t, cfg)
	data := bytes.Repeat([]byte("slow"), 1<<18) // 1 MiB: 64 pauses each way
	start := time.Now()
	if err := s.Put(t.Context(), "k", data); err != nil {
		t.Fatalf("slow Put: %v", err)
	}
	mustGetBytes(t, s, "k", data)
	if took := time.Since(start); took < 3*stall {
		t.Fatalf("transfers took %v: too fast to prove anything (want over %v)", took, 3*stall)
	}
	ft.want(t, "PUT 200", "GET 200")
}
