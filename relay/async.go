package relay

// pending is the result of a function run on a goroutine of its own: the
// preflight's store checks, the lease taken beside START_REPLICATION and
// the SQL connection dialled ahead each run so.
type pending[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// async runs f on a goroutine; wait returns its result.
func async[T any](f func() (T, error)) *pending[T] {
	p := &pending[T]{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.v, p.err = f()
	}()
	return p
}

func (p *pending[T]) wait() (T, error) {
	<-p.done
	return p.v, p.err
}
