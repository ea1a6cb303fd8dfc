package catalog

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestTopicMetaRoundTrip(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	if _, ok, err := ReadTopicMeta(ctx, s, "orders"); ok || err != nil {
		t.Fatalf("metadata of a topic never described: ok=%t %v", ok, err)
	}
	in := TopicMeta{Topic: "orders", Owner: "team-checkout", Description: "Every order's lifecycle.\nAuthoritative."}
	if err := WriteTopicMeta(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadTopicMeta(ctx, s, "orders")
	if err != nil || !ok || got.Owner != in.Owner || got.Description != in.Description || time.Since(got.Updated) > time.Minute {
		t.Fatalf("read back %+v ok=%t %v", got, ok, err)
	}
	if got, err := ListDescribed(ctx, s); err != nil || len(got) != 1 || got[0] != "orders" {
		t.Fatalf("ListDescribed = %q, %v", got, err)
	}
	// A record copied under another topic's key is refused, not believed.
	b, _ := s.Get(ctx, Prefix+"topicmeta/orders.json")
	if err := s.Put(ctx, Prefix+"topicmeta/payments.json", b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadTopicMeta(ctx, s, "payments"); err == nil || !strings.Contains(err.Error(), `names topic "orders"`) {
		t.Fatalf("a record naming another topic: %v", err)
	}
}

func TestTopicMetaRejectsBadText(t *testing.T) {
	for _, m := range []TopicMeta{
		{Topic: "../x"},
		{Topic: "orders", Owner: strings.Repeat("o", MaxOwnerLen+1)},
		{Topic: "orders", Description: strings.Repeat("d", MaxDescriptionLen+1)},
		{Topic: "orders", Owner: "team\nx"},
		{Topic: "orders", Description: "bell\a"},
		{Topic: "orders", Description: "\xff\xfe"},
		{Topic: "orders", Owner: " padded"},
	} {
		if err := WriteTopicMeta(context.Background(), newStore(t), m); err == nil {
			t.Errorf("accepted %+v", m)
		}
	}
}

func TestListMarkers(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	for _, slot := range []string{"billing", "accounts"} {
		if err := WriteMarker(ctx, s, Marker{AppID: LegacyAppID(slot), Slot: slot, Database: slot + "db"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, Prefix+"relays/stray.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	got, err := ListMarkers(ctx, s)
	if err != nil || len(got) != 2 || got[0].Slot != "accounts" || got[1].Database != "billingdb" {
		t.Fatalf("ListMarkers = %+v, %v", got, err)
	}
}
