package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// List implements Store with ListObjectsV2 (Prefix, StartAfter, paginated).
func (s *S3) List(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	out, err := s.list(ctx, prefix, startAfter)
	if err != nil {
		return nil, fmt.Errorf("list %q after %q in %s: %w", prefix, startAfter, s, err)
	}
	return out, nil
}

func (s *S3) list(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	base := ""
	if s.prefix != "" {
		base = s.prefix + "/"
	}
	in := &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(base + prefix),
	}
	if startAfter != "" {
		in.StartAfter = aws.String(base + startAfter)
	}
	out := []Object{}
	pages := s3.NewListObjectsV2Paginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			key := strings.TrimPrefix(aws.ToString(o.Key), base)
			// Directory markers ("a/") are not objects; the filters are
			// re-applied so a lax server cannot break the contract.
			if strings.HasSuffix(key, "/") || !strings.HasPrefix(key, prefix) || key <= startAfter {
				continue
			}
			out = append(out, Object{Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	if !slices.IsSortedFunc(out, compareObjects) {
		slices.SortFunc(out, compareObjects)
	}
	return out, nil
}

func compareObjects(a, b Object) int { return strings.Compare(a.Key, b.Key) }
