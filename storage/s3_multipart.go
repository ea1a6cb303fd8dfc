package storage

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// defaultPartSize is the part size of multipart uploads, and so the size
// above which Commit uses one. Memory does not depend on it (parts are read
// from the temporary file for every attempt); it bounds what a failed
// attempt sends again and how long one request runs, at a cost of two extra
// requests per object (create, complete) plus one per part. 16 MiB makes a
// 64 MiB data file four parts, is well above S3's 5 MiB minimum, and allows
// objects up to 156 GiB (10000 parts).
const defaultPartSize = 16 << 20

const maxParts = 10000 // S3's limit

// abortTimeout bounds the cleanup of a failed multipart upload, which runs
// even when the caller's context has ended.
const abortTimeout = time.Minute

// putMultipart uploads size bytes of src as parts of partSize whose MD5s
// are sums, one part after the other. On failure the upload is aborted; an
// upload that cannot be aborted (server down, process killed) is left for
// SweepTemp. The object appears atomically when the upload completes.
func (s *S3) putMultipart(ctx context.Context, key string, src io.ReaderAt, size, partSize int64, sums [][md5.Size]byte) error {
	if len(sums) > maxParts {
		return fmt.Errorf("%d bytes need %d parts of %d bytes, over S3's limit of %d", size, len(sums), partSize, maxParts)
	}
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", err)
	}
	id := aws.ToString(out.UploadId)
	parts, err := s.uploadParts(ctx, key, id, src, size, partSize, sums)
	if err == nil {
		err = s.completeMultipart(ctx, key, id, parts, sums)
	}
	if err != nil {
		s.abortMultipart(ctx, key, id)
	}
	return err
}

func (s *S3) uploadParts(ctx context.Context, key, id string, src io.ReaderAt, size, partSize int64, sums [][md5.Size]byte) ([]types.CompletedPart, error) {
	parts := make([]types.CompletedPart, 0, len(sums))
	for i, sum := range sums {
		off := int64(i) * partSize
		p := payload{src: src, off: off, size: min(partSize, size-off), md5: sum}
		num := aws.Int32(int32(i + 1))
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(s.fullKey(key)),
			UploadId:      aws.String(id),
			PartNumber:    num,
			Body:          p.reader(),
			ContentLength: aws.Int64(p.size),
			ContentMD5:    p.contentMD5(),
		}, p.replay)
		if err != nil {
			return nil, fmt.Errorf("upload part %d of %d: %w", i+1, len(sums), err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: num})
	}
	return parts, nil
}

// completeMultipart completes the upload. When the complete fails (a
// retried complete whose first attempt landed gets NoSuchUpload on AWS, a
// lost answer gets a connection error) the object is read back (HEAD): an
// ETag equal to the multipart ETag of our parts means our upload landed.
func (s *S3) completeMultipart(ctx context.Context, key, id string, parts []types.CompletedPart, sums [][md5.Size]byte) error {
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(s.fullKey(key)),
		UploadId:        aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	head, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if herr == nil && aws.ToString(head.ETag) == multipartETag(sums) {
		return nil
	}
	return fmt.Errorf("complete multipart upload: %w", err)
}

// multipartETag is the ETag S3 gives a completed multipart upload: the MD5
// of the parts' MD5s, a dash and the number of parts, quoted.
func multipartETag(sums [][md5.Size]byte) string {
	h := md5.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	return fmt.Sprintf("%q", hex.EncodeToString(h.Sum(nil))+fmt.Sprintf("-%d", len(sums)))
}

// abortMultipart discards an upload's parts, also when ctx has ended. A
// failure is logged: SweepTemp collects the upload later.
func (s *S3) abortMultipart(ctx context.Context, key, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(s.fullKey(key)),
		UploadId: aws.String(id),
	})
	if err != nil && !isNoSuchUpload(err) {
		s.log.Warn("s3 multipart upload left behind; SweepTemp will remove it",
			"store", s.String(), "key", key, "upload", id, "error", err.Error())
	}
}

func isNoSuchUpload(err error) bool {
	var nsu *types.NoSuchUpload
	return errors.As(err, &nsu) || apiCode(err) == "NoSuchUpload"
}
