package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// streamAgeMetric is the relay's gauge of its replication stream's
// silence, labelled by slot.
const streamAgeMetric = "deltabus_stream_last_message_age_seconds"

// relayStreamAge asks the relay serving /metrics on addr how long ago its
// replication stream for slot last delivered a message. It reports false
// when no relay answers there within timeout or none streams that slot:
// `relay status` then shows the server's view only.
func relayStreamAge(ctx context.Context, addr, slot string, timeout time.Duration) (time.Duration, bool) {
	url, err := readyzURL(addr)
	if err != nil {
		return 0, false
	}
	url = strings.TrimSuffix(url, "/readyz") + "/metrics"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, false
	}
	for _, m := range fams[streamAgeMetric].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "slot" && l.GetValue() == slot && m.GetGauge() != nil {
				return time.Duration(m.GetGauge().GetValue() * float64(time.Second)), true
			}
		}
	}
	return 0, false
}

// ageText renders an age for the status lines.
func ageText(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fs ago", d.Seconds())
	}
	return d.Round(time.Second).String() + " ago"
}
