package members

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/deltabus/deltabus/subscribe"
)

// Source hands a group's events to its members. Two implementations:
// Groups, which serves groups from the store in this process, and
// serve.Client, a client of `relay serve` over HTTP; memberstest is the
// conformance suite both pass.
type Source interface {
	// Receive hands out up to req.Max events the group's other members do
	// not hold, waiting up to req.Wait for one; an empty answer is not an
	// error.
	Receive(ctx context.Context, group, topic string, req ReceiveRequest) ([]Message, error)
	// Ack acknowledges deliveries: their events are done.
	Ack(ctx context.Context, group, topic string, ackIDs []string) (AckResult, error)
	// Nack gives deliveries back: their events are handed out again after
	// retryAfter, to any member.
	Nack(ctx context.Context, group, topic string, ackIDs []string, retryAfter time.Duration) (AckResult, error)
	// Reset starts the group again at start: every event from there is
	// handed out again.
	Reset(ctx context.Context, group, topic string, start subscribe.Start) (Position, error)
}

// Handler handles one event. nil acknowledges it; an error gives it back
// (Nack) to be handed out again after ConsumeOptions.RetryAfter.
type Handler func(ctx context.Context, m *Message) error

// ConsumeOptions configure Consume.
type ConsumeOptions struct {
	// Member names this member (required). Members of a group share its
	// events; each event goes to one member at a time, a key's events one
	// after the other.
	Member string
	// Max, Wait and Visibility are each receive's (ReceiveRequest):
	// defaults 10 events, 5 s and 30 s.
	Max        int
	Wait       time.Duration
	Visibility time.Duration
	// RetryAfter is the delay before an event whose handler failed is
	// handed out again (default 1 s).
	RetryAfter time.Duration
	// Want and PassNewer declare the versions the handler reads
	// (ReceiveRequest).
	Want      map[string]int32
	PassNewer bool
	// Reveal asks for personal fields decrypted (the source must allow it).
	Reveal bool
	Logger *slog.Logger
}

// Consume runs one member of group in topic until ctx ends (then it
// returns nil) or the source fails for good: it receives events, hands
// each to h in the order received, and acknowledges the handled ones (one
// request per batch, sent while the next batch is received). A handler
// error gives its event back. The events of one batch are of different
// keys, and an event's successor of the same key is handed out only once
// it is acknowledged: per-key order holds across all members.
func Consume(ctx context.Context, src Source, group, topic string, h Handler, o ConsumeOptions) error {
	if o.Member == "" {
		return errors.New("members: ConsumeOptions.Member is required: name each member of the group")
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Second
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	req := ReceiveRequest{Member: o.Member, Max: o.Max, Wait: o.Wait, Visibility: o.Visibility, Want: o.Want, PassNewer: o.PassNewer, Reveal: o.Reveal}
	acks := newAcker(src, group, topic, o)
	defer acks.close()
	visibility := cmp.Or(o.Visibility, DefaultVisibility)
	for backoff := 100 * time.Millisecond; ; {
		// The leases are granted after the request is sent: they end no
		// earlier than now plus the visibility.
		leaseEnd := time.Now().Add(visibility)
		msgs, err := src.Receive(ctx, group, topic, req)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !IsUnavailable(err) {
				return err
			}
			o.Logger.Warn("members: receive failed; trying again", "member", o.Member, "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		var done, failed []string
		for i := range msgs {
			if err := h(ctx, &msgs[i]); err != nil {
				if ctx.Err() != nil {
					break // stopping: the rest comes back when its lease ends
				}
				o.Logger.Warn("members: handler failed; the event is handed out again", "member", o.Member,
					"event_id", msgs[i].Event.ID, "delivery", msgs[i].Delivery, "err", err)
				failed = append(failed, msgs[i].AckID)
				continue
			}
			done = append(done, msgs[i].AckID)
		}
		acks.send(done, failed, leaseEnd)
	}
}

// acker sends a member's acks in order, in the background.
type acker struct {
	src          Source
	group, topic string
	o            ConsumeOptions
	mu           sync.Mutex
	q            []ackBatch
	wake         chan struct{}
	done         chan struct{}
	stop         bool
}

type ackBatch struct {
	done, failed []string
	leaseEnd     time.Time // the batch's leases end no earlier
}

func newAcker(src Source, group, topic string, o ConsumeOptions) *acker {
	a := &acker{src: src, group: group, topic: topic, o: o, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go a.run()
	return a
}

func (a *acker) send(done, failed []string, leaseEnd time.Time) {
	if len(done)+len(failed) == 0 {
		return
	}
	a.mu.Lock()
	a.q = append(a.q, ackBatch{done, failed, leaseEnd})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// close sends what is queued (for up to 10 s) and stops.
func (a *acker) close() {
	a.mu.Lock()
	a.stop = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
}

func (a *acker) run() {
	defer close(a.done)
	for {
		a.mu.Lock()
		q, stop := a.q, a.stop
		a.q = nil
		a.mu.Unlock()
		var done, failed []string
		var leaseEnd time.Time
		for _, b := range q {
			done, failed = append(done, b.done...), append(failed, b.failed...)
			if leaseEnd.IsZero() || b.leaseEnd.Before(leaseEnd) {
				leaseEnd = b.leaseEnd
			}
		}
		if len(done) > 0 {
			a.ack(done, leaseEnd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if len(failed) > 0 {
			if _, err := a.src.Nack(ctx, a.group, a.topic, failed, a.o.RetryAfter); err != nil {
				a.o.Logger.Warn("members: giving events back failed; they are handed out again once their lease ends", "member", a.o.Member, "err", err)
			}
		}
		cancel()
		if stop && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-a.wake
		}
	}
}

// ack acknowledges, retrying while the source is unavailable and the
// leases hold (not once the member stops): an acknowledgement repeated
// after one that landed succeeds again, so a server restart between the
// two costs no redelivery.
func (a *acker) ack(done []string, leaseEnd time.Time) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := a.src.Ack(ctx, a.group, a.topic, done)
		cancel()
		a.mu.Lock()
		stop := a.stop
		a.mu.Unlock()
		switch {
		case err == nil:
			if len(res.Failed) > 0 {
				a.o.Logger.Warn("members: acknowledgements refused", "member", a.o.Member, "first", res.Failed[0].AckID, "reason", res.Failed[0].Reason, "refused", len(res.Failed))
			}
			return
		case !IsUnavailable(err) || stop || time.Now().Add(backoff).After(leaseEnd):
			a.o.Logger.Warn("members: acknowledging failed; those events are handed out again", "member", a.o.Member, "events", len(done), "err", err)
			return
		}
		time.Sleep(backoff)
	}
}
