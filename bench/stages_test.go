package bench

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/faultproxy"
)

// TestScrapeOfASilentRelayFails: a relay that takes the request and never
// answers fails the scrape at scrapeTimeout instead of hanging the
// benchmark.
func TestScrapeOfASilentRelayFails(t *testing.T) {
	p := faultproxy.New(t, "127.0.0.1:1")
	if err := p.Set(faultproxy.Fault{Mode: faultproxy.Hang}); err != nil {
		t.Fatal(err)
	}
	old := scrapeTimeout
	scrapeTimeout = 200 * time.Millisecond
	defer func() { scrapeTimeout = old }()
	start := time.Now()
	if _, err := scrapeStages(context.Background(), p.Addr()); err == nil {
		t.Fatal("scrape of a silent relay returned no error")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("scrape of a silent relay took %v, want about the 200 ms timeout", took)
	}
	if got := p.Stats(); got.Requests == 0 {
		t.Fatalf("the scrape never reached the silent relay: %+v", got)
	}
}
