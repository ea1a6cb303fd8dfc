package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sweeper is implemented by stores that can remove what writers killed
// mid-write leave behind, which would otherwise stay forever: Local's
// hidden temporary files, S3's multipart uploads never completed or
// aborted. *Local, *S3, every store Sub returns and Faulty implement it
// (the last two pass the call on, failing with errors.ErrUnsupported when
// the store below cannot sweep).
type Sweeper interface {
	// SweepTemp removes the unfinished writes of keys starting with prefix
	// (validated like List's; "" = the whole store) that are at least
	// olderThan old, and returns how many it removed. olderThan must be
	// positive. A write younger than olderThan is never touched, so a live
	// writer is safe as long as it finishes within olderThan of its last
	// write (local: the temporary file's modification time; S3: the
	// upload's start, by the server's clock); a writer that takes longer
	// fails at Commit, loudly. Choose hours, far above any commit's
	// duration and any clock skew. Objects are never touched.
	SweepTemp(ctx context.Context, prefix string, olderThan time.Duration) (n int, err error)
}

var (
	_ Sweeper = (*Local)(nil)
	_ Sweeper = (*S3)(nil)
	_ Sweeper = (*subStore)(nil)
	_ Sweeper = (*Faulty)(nil)
	_ Sweeper = errStore{}
)

// checkSweep validates the arguments of SweepTemp on s.
func checkSweep(ctx context.Context, s Store, prefix string, olderThan time.Duration) error {
	err := validatePrefix(prefix)
	switch {
	case err != nil:
	case olderThan <= 0:
		err = fmt.Errorf("age %v must be positive", olderThan)
	default:
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("sweep temporary files under %q in %s: %w", prefix, s, err)
	}
	return nil
}

// sweepInner is SweepTemp of a wrapping store: inner's, or an error
// wrapping errors.ErrUnsupported when inner cannot sweep.
func sweepInner(ctx context.Context, inner Store, prefix string, olderThan time.Duration) (int, error) {
	sw, ok := inner.(Sweeper)
	if !ok {
		return 0, fmt.Errorf("sweep temporary files of %s: %w", inner, errors.ErrUnsupported)
	}
	return sw.SweepTemp(ctx, prefix, olderThan)
}

// SweepTemp implements Sweeper for the sub-store, under its prefix.
func (s *subStore) SweepTemp(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := validatePrefix(prefix); err != nil {
		return 0, err
	}
	return sweepInner(ctx, s.inner, s.prefix+"/"+prefix, olderThan)
}

// SweepTemp implements Sweeper by passing the call to the inner store
// (no faults apply).
func (f *Faulty) SweepTemp(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	return sweepInner(ctx, f.inner, prefix, olderThan)
}

func (e errStore) SweepTemp(context.Context, string, time.Duration) (int, error) { return 0, e.err }
