package storage

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// payload is a request body that can be read again from its start for
// every HTTP attempt: a section of a file, or a byte slice.
type payload struct {
	src  io.ReaderAt
	off  int64
	size int64
	md5  [md5.Size]byte
}

func bytesPayload(data []byte) payload {
	return payload{src: bytes.NewReader(data), size: int64(len(data)), md5: md5.Sum(data)}
}

// reader returns a fresh reader of the whole payload.
func (p payload) reader() *io.SectionReader { return io.NewSectionReader(p.src, p.off, p.size) }

func (p payload) contentMD5() *string {
	return aws.String(base64.StdEncoding.EncodeToString(p.md5[:]))
}

// replay is a per-operation option that gives each HTTP request of the
// operation a GetBody re-reading p, which the retrying transport uses for
// every attempt instead of reading the body into memory. With the
// test-only bufferedUploads switch on it does nothing (the old path).
func (p payload) replay(o *s3.Options) {
	if bufferedUploads.Load() {
		return
	}
	o.HTTPClient = replayClient{next: o.HTTPClient, p: p}
}

type replayClient struct {
	next s3.HTTPClient
	p    payload
}

func (c replayClient) Do(req *http.Request) (*http.Response, error) {
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(c.p.reader()), nil }
	return c.next.Do(req)
}
