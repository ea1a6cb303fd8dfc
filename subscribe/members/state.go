package members

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/deltabus/deltabus/subscribe"
)

// Position is a place in the table holding the topic (subscribe.Position).
type Position = subscribe.Position

// less orders positions.
func less(a, b Position) bool {
	return a.Version < b.Version || (a.Version == b.Version && a.Offset < b.Offset)
}

// state is a group's shared state at one entry of its log: every server
// of the group computes the same state from the same entries (apply is
// deterministic and reads nothing else), and a snapshot is this state
// written out.
type state struct {
	Seq     int64  // the last entry applied
	Epoch   int64  // bumped by every reset; ack ids carry it
	TableID string // Delta metaData.id of the table the positions refer to
	// Low: every event before it was acknowledged (or skipped as a
	// duplicate); nothing before it is ever handed out again.
	Low Position
	// acked holds the acknowledged positions at or after Low, per
	// version, as sorted disjoint offset ranges [from, to).
	acked map[int64][][2]int64
	// flight holds the events at or after Low handed out at least once
	// and not acknowledged.
	flight map[Position]*flight
	// Counters since the group was created, for throughput and alerts.
	Delivered, Redelivered, Acked, Skipped int64
	Created                                time.Time
	view                                   *View // of the snapshot it was read from, if any
}

// flight is an event handed out and not acknowledged: leased to Member
// until Until, or free again (nacked, or its lease ran out) from NotBefore.
type flight struct {
	Delivery  int32     // deliveries of the event to this group so far
	Member    string    // the member it was last handed to
	Until     time.Time // end of the last lease; zero once nacked
	NotBefore time.Time // a nack's retry time
	First     time.Time // first delivery
}

// leased reports whether the event is leased at now.
func (f *flight) leased(now time.Time) bool { return now.Before(f.Until) }

// ready reports whether the event may be handed out at now (leases
// aside: whether it heads its key is the index's to say).
func (f *flight) ready(now time.Time) bool {
	return f == nil || (!f.leased(now) && !now.Before(f.NotBefore))
}

func newState() *state {
	return &state{acked: map[int64][][2]int64{}, flight: map[Position]*flight{}}
}

// isAcked reports whether the event at p needs no delivery any more.
func (s *state) isAcked(p Position) bool {
	if less(p, s.Low) {
		return true
	}
	for _, r := range s.acked[p.Version] {
		if p.Offset < r[0] {
			return false
		}
		if p.Offset < r[1] {
			return true
		}
	}
	return false
}

// markAcked adds p to the acknowledged ranges.
func (s *state) markAcked(p Position) {
	if less(p, s.Low) {
		return
	}
	rs := s.acked[p.Version]
	i, _ := slices.BinarySearchFunc(rs, p.Offset, func(r [2]int64, o int64) int { return cmp.Compare(r[1], o) })
	// rs[i] is the first range ending at or after p.Offset.
	switch {
	case i < len(rs) && rs[i][0] <= p.Offset && p.Offset < rs[i][1]:
		return // already
	case i < len(rs) && rs[i][1] == p.Offset:
		rs[i][1]++
		if i+1 < len(rs) && rs[i+1][0] == rs[i][1] {
			rs[i][1] = rs[i+1][1]
			rs = slices.Delete(rs, i+1, i+2)
		}
	case i < len(rs) && rs[i][0] == p.Offset+1:
		rs[i][0]--
	default:
		rs = slices.Insert(rs, i, [2]int64{p.Offset, p.Offset + 1})
	}
	s.acked[p.Version] = rs
}

// setLow moves Low forward to p and forgets what lies before it.
func (s *state) setLow(p Position) {
	if !less(s.Low, p) {
		return
	}
	s.Low = p
	for v, rs := range s.acked {
		if v < p.Version {
			delete(s.acked, v)
			continue
		}
		if v == p.Version {
			k := 0
			for k < len(rs) && rs[k][1] <= p.Offset {
				k++
			}
			rs = rs[k:]
			if len(rs) > 0 && rs[0][0] < p.Offset {
				rs[0][0] = p.Offset
			}
			if len(rs) == 0 {
				delete(s.acked, v)
			} else {
				s.acked[v] = rs
			}
		}
	}
	for q := range s.flight {
		if less(q, p) {
			delete(s.flight, q)
		}
	}
}

// entry is one change of a group's state: the log's unit, written
// put-if-absent at the sequence number after the state it was computed
// against. Times are Unix milliseconds.
type entry struct {
	Server string    `json:"server"` // the writing process (also makes two writers' bytes differ)
	At     int64     `json:"at"`
	Reset  *resetOp  `json:"reset,omitempty"`
	Lease  []leaseOp `json:"lease,omitempty"`
	Ack    []posOp   `json:"ack,omitempty"`
	Skip   []posOp   `json:"skip,omitempty"` // duplicates by event_id: acknowledged without delivery
	Nack   []nackOp  `json:"nack,omitempty"`
	Low    *Position `json:"low,omitempty"`
}

type resetOp struct {
	Epoch   int64    `json:"epoch"`
	Low     Position `json:"low"`
	TableID string   `json:"table_id"`
}

type posOp struct {
	V int64 `json:"v"`
	O int64 `json:"o"`
}

func (p posOp) pos() Position { return Position{Version: p.V, Offset: p.O} }

type leaseOp struct {
	posOp
	D     int32  `json:"d"`
	M     string `json:"m"`
	Until int64  `json:"until"`
}

type nackOp struct {
	posOp
	NotBefore int64 `json:"nb"`
}

func (e *entry) empty() bool {
	return e.Reset == nil && len(e.Lease)+len(e.Ack)+len(e.Skip)+len(e.Nack) == 0 && e.Low == nil
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// apply applies e, entry number seq, to the state. It checks nothing: the
// writer computed e against the state before it (seq-1), so every
// operation in it is valid there.
func (s *state) apply(seq int64, e *entry) {
	s.Seq = seq
	at := fromMS(e.At)
	if e.Reset != nil {
		s.Epoch, s.TableID, s.Low = e.Reset.Epoch, e.Reset.TableID, e.Reset.Low
		s.acked, s.flight = map[int64][][2]int64{}, map[Position]*flight{}
		if s.Created.IsZero() {
			s.Created = at
		}
	}
	for _, l := range e.Lease {
		f := s.flight[l.pos()]
		if f == nil {
			f = &flight{First: at}
			s.flight[l.pos()] = f
		}
		if l.D > 1 {
			s.Redelivered++
		}
		s.Delivered++
		f.Delivery, f.Member, f.Until, f.NotBefore = l.D, l.M, fromMS(l.Until), time.Time{}
	}
	for _, a := range e.Ack {
		delete(s.flight, a.pos())
		s.markAcked(a.pos())
		s.Acked++
	}
	for _, a := range e.Skip {
		delete(s.flight, a.pos())
		s.markAcked(a.pos())
		s.Skipped++
	}
	for _, n := range e.Nack {
		if f := s.flight[n.pos()]; f != nil {
			f.Until, f.NotBefore = time.Time{}, fromMS(n.NotBefore)
		}
	}
	if e.Low != nil {
		s.setLow(*e.Low)
	}
}

// snapshotJSON is a snapshot's form in the store.
type snapshotJSON struct {
	Format      int                   `json:"format"`
	Group       string                `json:"group"`
	Topic       string                `json:"topic"`
	Seq         int64                 `json:"seq"`
	Epoch       int64                 `json:"epoch"`
	TableID     string                `json:"table_id"`
	Low         Position              `json:"low"`
	Acked       map[string][][2]int64 `json:"acked"`
	Flight      []flightJSON          `json:"flight"`
	Delivered   int64                 `json:"delivered"`
	Redelivered int64                 `json:"redelivered"`
	AckedCount  int64                 `json:"acked_count"`
	Skipped     int64                 `json:"skipped"`
	Created     int64                 `json:"created"`
	// View is what the writing server saw when it wrote the snapshot, for
	// pages and checks that read the store (not part of the state).
	View *View `json:"view,omitempty"`
}

// View is a server's live view of a group, kept with each snapshot.
type View struct {
	At       time.Time      `json:"at"`
	Members  []MemberStatus `json:"members"`
	Waiting  int            `json:"waiting"`
	AckRate  float64        `json:"acked_per_second"`
	Oldest   *Oldest        `json:"oldest,omitempty"`
	Buffered int            `json:"buffered"`
}

type flightJSON struct {
	posOp
	D     int32  `json:"d"`
	M     string `json:"m"`
	Until int64  `json:"until,omitempty"`
	NB    int64  `json:"nb,omitempty"`
	First int64  `json:"first"`
}

const snapshotFormat = 1

func (s *state) marshal(group, topic string, view *View) ([]byte, error) {
	j := snapshotJSON{Format: snapshotFormat, Group: group, Topic: topic, Seq: s.Seq, Epoch: s.Epoch, TableID: s.TableID,
		Low: s.Low, Acked: make(map[string][][2]int64, len(s.acked)), Flight: make([]flightJSON, 0, len(s.flight)),
		Delivered: s.Delivered, Redelivered: s.Redelivered, AckedCount: s.Acked, Skipped: s.Skipped, Created: ms(s.Created), View: view}
	for v, rs := range s.acked {
		j.Acked[fmt.Sprint(v)] = rs
	}
	for p, f := range s.flight {
		j.Flight = append(j.Flight, flightJSON{posOp: posOp{p.Version, p.Offset}, D: f.Delivery, M: f.Member,
			Until: ms(f.Until), NB: ms(f.NotBefore), First: ms(f.First)})
	}
	slices.SortFunc(j.Flight, func(a, b flightJSON) int { return cmp.Or(cmp.Compare(a.V, b.V), cmp.Compare(a.O, b.O)) })
	return json.Marshal(j)
}

func unmarshalState(data []byte, group, topic string) (*state, error) {
	var j snapshotJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, err
	}
	switch {
	case j.Format != snapshotFormat:
		return nil, fmt.Errorf("snapshot format %d, this release reads %d", j.Format, snapshotFormat)
	case j.Group != group || j.Topic != topic:
		return nil, fmt.Errorf("snapshot of group %q topic %q", j.Group, j.Topic)
	}
	s := newState()
	s.Seq, s.Epoch, s.TableID, s.Low, s.view = j.Seq, j.Epoch, j.TableID, j.Low, j.View
	s.Delivered, s.Redelivered, s.Acked, s.Skipped, s.Created = j.Delivered, j.Redelivered, j.AckedCount, j.Skipped, fromMS(j.Created)
	for k, rs := range j.Acked {
		var v int64
		if _, err := fmt.Sscan(k, &v); err != nil {
			return nil, fmt.Errorf("acked version %q: %w", k, err)
		}
		s.acked[v] = rs
	}
	for _, f := range j.Flight {
		s.flight[f.pos()] = &flight{Delivery: f.D, Member: f.M, Until: fromMS(f.Until), NotBefore: fromMS(f.NB), First: fromMS(f.First)}
	}
	return s, nil
}
