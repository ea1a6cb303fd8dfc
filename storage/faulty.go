package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Op names a Store method for fault injection.
type Op string

// The Store methods Faulty counts and can fault.
const (
	OpPutIfAbsent Op = "PutIfAbsent"
	OpPut         Op = "Put"
	OpGet         Op = "Get"
	OpList        Op = "List"
	OpDelete      Op = "Delete"
)

// ErrInjected is the error Faulty returns when a fault names none.
var ErrInjected = errors.New("injected storage fault")

// Fault describes what Faulty does to one call (or every call) of Op.
type Fault struct {
	Op    Op
	Call  int           // 1-based call number of Op since creation or Reset; 0 = every call
	Delay time.Duration // sleep before the call (ends early, with ctx's error, when ctx ends)
	Err   error         // error to return; nil with Fail/After set = ErrInjected
	Fail  bool          // return Err instead of performing the call
	After bool          // perform the call on the inner store, then return Err (ambiguous outcome)
}

// Faulty wraps a Store for tests: it counts calls per method and applies
// injected faults (fail, delay, or fail after performing the call, which is
// how an ambiguous write looks to the caller). It is safe for concurrent use.
type Faulty struct {
	inner Store

	mu     sync.Mutex
	calls  map[Op]int
	faults []Fault
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner with no faults.
func NewFaulty(inner Store) *Faulty {
	return &Faulty{inner: inner, calls: make(map[Op]int)}
}

// Inject adds a fault. Several faults may match one call; their delays add
// up and the first with an error decides it.
func (f *Faulty) Inject(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault)
}

// FailNth makes call n (1-based; 0 = every call) of op return err (nil =
// ErrInjected) without reaching the inner store.
func (f *Faulty) FailNth(op Op, n int, err error) {
	f.Inject(Fault{Op: op, Call: n, Err: err, Fail: true})
}

// FailAfterNth makes call n of op reach the inner store and then return err
// (nil = ErrInjected) whatever the inner store said: the write landed but
// the caller sees an error.
func (f *Faulty) FailAfterNth(op Op, n int, err error) {
	f.Inject(Fault{Op: op, Call: n, Err: err, After: true})
}

// DelayNth makes call n of op sleep d before proceeding.
func (f *Faulty) DelayNth(op Op, n int, d time.Duration) {
	f.Inject(Fault{Op: op, Call: n, Delay: d})
}

// Calls returns how many times op has been called since creation or Reset
// (including faulted calls).
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Reset clears the counters and all faults.
func (f *Faulty) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = make(map[Op]int)
	f.faults = nil
}

// Inner returns the wrapped store.
func (f *Faulty) Inner() Store { return f.inner }

// String returns the inner store's URL.
func (f *Faulty) String() string { return f.inner.String() }

// plan counts a call of op and merges the faults that apply to it.
func (f *Faulty) plan(op Op) (delay time.Duration, before bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	n := f.calls[op]
	for _, ft := range f.faults {
		if ft.Op != op || (ft.Call != 0 && ft.Call != n) {
			continue
		}
		delay += ft.Delay
		if err == nil && (ft.Fail || ft.After) {
			err = ft.Err
			if err == nil {
				err = ErrInjected
			}
			err = fmt.Errorf("%s call %d: %w", op, n, err)
			before = ft.Fail
		}
	}
	return delay, before, err
}

// do runs one call of op through the fault plan.
func (f *Faulty) do(ctx context.Context, op Op, call func() error) error {
	delay, before, ferr := f.plan(op)
	if delay > 0 {
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if ferr != nil && before {
		return ferr
	}
	err := call()
	if ferr != nil {
		return ferr
	}
	return err
}

// PutIfAbsent implements Store.
func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPutIfAbsent, func() error { return f.inner.PutIfAbsent(ctx, key, data) })
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPut, func() error { return f.inner.Put(ctx, key, data) })
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := f.do(ctx, OpGet, func() (err error) {
		data, err = f.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	var objs []Object
	err := f.do(ctx, OpList, func() (err error) {
		objs, err = f.inner.List(ctx, prefix, startAfter)
		return err
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(ctx, OpDelete, func() error { return f.inner.Delete(ctx, key) })
}

// Create implements Store. Faults of OpPut apply to the writer's Commit:
// committing a created object is a Put, as callers see it.
func (f *Faulty) Create(ctx context.Context, key string) (ObjectWriter, error) {
	w, err := f.inner.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	return &faultyWriter{ObjectWriter: w, f: f}, nil
}

type faultyWriter struct {
	ObjectWriter
	f *Faulty
}

func (w *faultyWriter) Commit(ctx context.Context) error {
	err := w.f.do(ctx, OpPut, func() error { return w.ObjectWriter.Commit(ctx) })
	w.ObjectWriter.Abort()
	return err
}
