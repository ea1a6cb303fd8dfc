package members

import (
	"sort"
	"time"
)

// Status is one group's state as this server sees it.
type Status struct {
	Group    string   `json:"group"`
	Topic    string   `json:"topic"`
	Epoch    int64    `json:"epoch"`
	Position Position `json:"position"` // everything before it is acknowledged
	ReadTo   Position `json:"read_to"`  // the server has read the topic up to here
	Buffered int      `json:"buffered"` // events held from Position on
	// Unacked events from Position on, of which InFlight are leased now
	// and Waiting wait behind an earlier event of their key.
	Unacked  int `json:"unacked"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	// Counters since the group was created (its first entry).
	Delivered   int64          `json:"delivered"`
	Redelivered int64          `json:"redelivered"`
	Acked       int64          `json:"acked"`
	Skipped     int64          `json:"duplicates_skipped"`
	AckRate     float64        `json:"acked_per_second"` // over the last minute
	Members     []MemberStatus `json:"members"`
	// Oldest is the oldest event not acknowledged: its key is the one
	// that holds the group's position back.
	Oldest *Oldest `json:"oldest,omitempty"`
	Error  string  `json:"error,omitempty"` // why the group cannot read its topic
}

// MemberStatus is a member seen in the last minute.
type MemberStatus struct {
	Name     string    `json:"name"`
	LastSeen time.Time `json:"last_seen"`
	InFlight int       `json:"in_flight"`
}

// Oldest describes the oldest event a group has not acknowledged.
type Oldest struct {
	Position   Position  `json:"position"`
	Key        string    `json:"key"`
	EventID    string    `json:"event_id"`
	CommitTime time.Time `json:"commit_time"` // of the Delta version holding it
	Delivery   int32     `json:"delivery"`    // 0: never handed out
	Member     string    `json:"member,omitempty"`
	FirstAt    time.Time `json:"first_delivered,omitempty"`
}

// memberWindow is how long a member counts as present after a request.
const memberWindow = time.Minute

func (g *Group) status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	st, x := g.st, g.ix
	s := Status{Group: g.name, Topic: g.topic, Epoch: st.Epoch, Position: st.Low, ReadTo: x.readTo, Buffered: x.buffered(),
		Unacked: x.unread, Waiting: x.unread - len(x.keys), Delivered: st.Delivered, Redelivered: st.Redelivered,
		Acked: st.Acked, Skipped: st.Skipped, AckRate: g.rate.perSecond(now), Members: []MemberStatus{}}
	per := map[string]int{}
	for _, f := range st.flight {
		if f.leased(now) {
			s.InFlight++
			per[f.Member]++
		}
	}
	g.forgetMembersLocked(now)
	for name, at := range g.members {
		s.Members = append(s.Members, MemberStatus{Name: name, LastSeen: at.UTC(), InFlight: per[name]})
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Name < s.Members[j].Name })
	if r := x.oldest(); r != nil && r.ev != nil {
		o := &Oldest{Position: r.pos, Key: r.key.name, EventID: r.ev.ID, CommitTime: r.ev.VersionTime.UTC()}
		if f := st.flight[r.pos]; f != nil {
			o.Delivery, o.Member, o.FirstAt = f.Delivery, f.Member, f.First
		}
		s.Oldest = o
	}
	if g.readErr != nil {
		s.Error = g.readErr.Error()
	}
	return s
}

// rateWindow counts acknowledgements per second over the last minute.
type rateWindow struct {
	sec   [60]int64
	stamp [60]int64 // the Unix second each slot counts
}

func (w *rateWindow) add(now time.Time, n int64) {
	if n == 0 {
		return
	}
	t := now.Unix()
	i := t % 60
	if w.stamp[i] != t {
		w.stamp[i], w.sec[i] = t, 0
	}
	w.sec[i] += n
}

// perSecond is the rate over the last minute's complete seconds.
func (w *rateWindow) perSecond(now time.Time) float64 {
	t := now.Unix()
	var sum int64
	for i := range w.sec {
		if age := t - w.stamp[i]; age >= 1 && age <= 60 {
			sum += w.sec[i]
		}
	}
	return float64(sum) / 60
}
