package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// SweepTemp implements Sweeper: it aborts the multipart uploads of keys
// under prefix started at least olderThan ago (by the server's clock,
// against ours): uploads of writers killed mid-commit, or whose abort
// failed, which S3 would otherwise keep, and bill, forever. Create's local
// temporary files need no sweeping: they have no name.
func (s *S3) SweepTemp(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := checkSweep(ctx, s, prefix, olderThan); err != nil {
		return 0, err
	}
	n, err := s.sweep(ctx, prefix, time.Now().Add(-olderThan))
	if err != nil {
		return n, fmt.Errorf("sweep multipart uploads under %q in %s: %w", prefix, s, err)
	}
	return n, nil
}

func (s *S3) sweep(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	full := s.fullKey(prefix) // "" → the store's own prefix + "/"
	pages := s3.NewListMultipartUploadsPaginator(s.client, &s3.ListMultipartUploadsInput{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(full),
	})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, u := range page.Uploads {
			key := aws.ToString(u.Key)
			// Filters re-applied so a lax server cannot widen the sweep.
			if !strings.HasPrefix(key, full) || u.Initiated == nil || !u.Initiated.Before(cutoff) {
				continue
			}
			_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket:   aws.String(s.bucket),
				Key:      u.Key,
				UploadId: u.UploadId,
			})
			if err != nil && !isNoSuchUpload(err) {
				return n, fmt.Errorf("abort upload %s of %q: %w", aws.ToString(u.UploadId), key, err)
			}
			if err == nil {
				n++
			}
		}
	}
	return n, nil
}
