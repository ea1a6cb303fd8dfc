package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// StageTime is where the measured relay's batches spent their time in one
// stage of its commit pipeline (deltabus_batch_stage_seconds, scraped
// before the relay stops): the mean is exact, the percentiles are the
// upper bounds of the histogram buckets they fall in.
type StageTime struct {
	Stage   string  `json:"stage"`
	Batches uint64  `json:"batches"`
	MeanMs  float64 `json:"meanMs"`
	P50Ms   float64 `json:"p50AtMostMs"`
	P99Ms   float64 `json:"p99AtMostMs"`
}

// pipelineStages is the order the stages run in.
var pipelineStages = []string{"open", "files", "queued", "logs"}

// scrapeStages reads the relay's deltabus_batch_stage_seconds at addr.
func scrapeStages(ctx context.Context, addr string) ([]StageTime, error) {
	body, err := scrape(ctx, addr)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	byStage := map[string]*dto.Histogram{}
	if mf := mfs["deltabus_batch_stage_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					byStage[l.GetValue()] = m.GetHistogram()
				}
			}
		}
	}
	var out []StageTime
	for _, st := range pipelineStages {
		h := byStage[st]
		if h == nil || h.GetSampleCount() == 0 {
			continue
		}
		n := h.GetSampleCount()
		out = append(out, StageTime{Stage: st, Batches: n, MeanMs: 1000 * h.GetSampleSum() / float64(n),
			P50Ms: 1000 * bucketBound(h, 0.50), P99Ms: 1000 * bucketBound(h, 0.99)})
	}
	return out, nil
}

// scrapeTimeout bounds one scrape of a measured relay's /metrics: a relay
// that accepts and never answers fails the run instead of hanging it.
var scrapeTimeout = 10 * time.Second

// scrape returns the text of the /metrics a relay serves at addr (at most
// 16 MiB).
func scrape(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return body, nil
}

// bucketBound is the upper bound of the bucket holding quantile q of h
// (+Inf past the last finite bound).
func bucketBound(h *dto.Histogram, q float64) float64 {
	want := q * float64(h.GetSampleCount())
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= want {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// formatStages renders stages as one comment line of a bench's output.
func formatStages(stages []StageTime) string {
	parts := make([]string, 0, len(stages))
	for _, s := range stages {
		parts = append(parts, fmt.Sprintf("%s %.1f ms (p50 ≤ %g, p99 ≤ %g)", s.Stage, s.MeanMs, s.P50Ms, s.P99Ms))
	}
	return "# where a batch's time went (the relay's deltabus_batch_stage_seconds, mean per batch): " + strings.Join(parts, ", ")
}
