package relay

import (
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// The breaker's window weighs the previous span by how much of it the
// window still covers, and forgets spans older than two windows.
func TestRateWindowSlides(t *testing.T) {
	d := time.Minute
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var w rateWindow
	for i := range 100 {
		w.roll(at.Add(time.Duration(i)*100*time.Millisecond), d)
		w.rows++
		if i%2 == 0 {
			w.refused++
		}
	}
	rows, refused := w.estimate(at.Add(10*time.Second), d)
	if rows != 100 || refused != 50 {
		t.Fatalf("within the first span: %v rows, %v refused", rows, refused)
	}
	// Half a window into the next span: half of the first span counts.
	next := at.Add(d + d/2)
	w.roll(next, d)
	if rows, refused = w.estimate(next, d); rows != 50 || refused != 25 {
		t.Fatalf("half a window on: %v rows, %v refused; want 50 and 25", rows, refused)
	}
	// Two windows of silence forget everything.
	late := at.Add(5 * d)
	w.roll(late, d)
	if rows, refused = w.estimate(late, d); rows != 0 || refused != 0 {
		t.Fatalf("after a silence: %v rows, %v refused", rows, refused)
	}
}

func TestBreakerDefaultsAndValidation(t *testing.T) {
	b := Breaker{}.withDefaults()
	if b.Rate != DefaultBreakerRate || b.Min != DefaultBreakerMin || b.Window != DefaultBreakerWindow || !b.on() {
		t.Fatalf("defaults %+v", b)
	}
	if (Breaker{Rate: -1}).withDefaults().on() {
		t.Fatal("a negative rate leaves the breaker on")
	}
	if err := (Breaker{Rate: 1.5}).validate(); err == nil {
		t.Fatal("a rate above 1 was accepted")
	}
}

// BenchmarkBreakerAccept is what the breaker costs the stream per event
// (a row of a topic that became an event).
func BenchmarkBreakerAccept(b *testing.B) {
	s := &session{r: &Relay{breaker: newBreaker(Breaker{})}}
	t := &topicView{rate: s.r.breaker.rate("orders")}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := make([]decoding.Row, 1024)
	for i := range rows {
		rows[i].CommitTime = at.Add(time.Duration(i) * time.Millisecond)
	}
	b.ResetTimer()
	for i := range b.N {
		s.breakerAccept(t, &rows[i&1023])
	}
}
