package check

import (
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

func TestBreaches(t *testing.T) {
	th := Thresholds{MaxLagVersions: 10, MaxLagSeconds: 60, MinHeadroom: time.Hour, MinCompleteness: 0.999, MaxDuplicateRate: 0}
	ok := Row{LagVersions: 10, LagSeconds: 60, HeadroomVersions: 5, HeadroomSeconds: 7200,
		Completeness: &Completeness{Expected: 1000, Found: 1000, Ratio: 1}}
	if b := th.breaches(ok); len(b) != 0 {
		t.Fatalf("a row at the thresholds breaches: %v", b)
	}
	bad := Row{Version: 3, EarliestVersion: 9, LagVersions: 11, LagSeconds: 61, HeadroomVersions: -6,
		Completeness: &Completeness{Expected: 1000, Found: 990, Missing: 10, Ratio: 0.99, DuplicateRate: 0.01}}
	got := strings.Join(th.breaches(bad), "; ")
	for _, want := range []string{"retention passed this group's position (version 3, earliest 9)", "lag 11 versions > 10",
		"lag 61s > 60s", "completeness 0.9900 < 0.9990 (10 of 1000 keys missing)", "duplicate rate 0.0100 > 0.0000"} {
		if !strings.Contains(got, want) {
			t.Errorf("breaches %q lack %q", got, want)
		}
	}
	if off := (Thresholds{MaxDuplicateRate: -1}).breaches(Row{LagVersions: 1e6, Completeness: &Completeness{DuplicateRate: 0.5}}); len(off) != 0 {
		t.Errorf("thresholds off still breach: %v", off)
	}
}

func TestEventKey(t *testing.T) {
	e := outbox.Event{ID: "id-1", Key: "cust-7", Payload: `{"order_id": 42, "ref": "A-1", "gone": null}`}
	for field, want := range map[string]string{"event_id": "id-1", "key": "cust-7", "payload.order_id": "42", "payload.ref": "A-1"} {
		if got, ok := eventKey(e, field); !ok || got != want {
			t.Errorf("eventKey(%s) = %q, %t; want %q", field, got, ok, want)
		}
	}
	for _, field := range []string{"payload.gone", "payload.missing", "other"} {
		if got, ok := eventKey(e, field); ok {
			t.Errorf("eventKey(%s) = %q, want none", field, got)
		}
	}
}

func TestSourcesText(t *testing.T) {
	got := sourcesText([]SourceRead{
		{AppID: "deltabus-1-deltabus", Database: "app", Read: "0/10", Latest: "0/10"},
		{AppID: "deltabus-2-deltabus", Latest: "0/20", LagBytes: 32},
	})
	want := "deltabus-1-deltabus (app) read 0/10 latest 0/10; deltabus-2-deltabus read none latest 0/20 behind 32 B"
	if got != want {
		t.Errorf("sourcesText = %q; want %q", got, want)
	}
	if got := sourcesText(nil); got != "-" {
		t.Errorf("sourcesText(nil) = %q; want -", got)
	}
}
