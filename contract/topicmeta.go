package contract

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
)

// TopicMeta is the topicmeta.Provider of contracts: it fills a topic's
// Info.Contracts with each event type's registered versions and its
// compatibility mode, so `relay topics` and the Unity Catalog properties
// show them. It only reads the registry (one List of the topic's
// contracts).
type TopicMeta struct{}

// Describe implements topicmeta.Provider.
func (TopicMeta) Describe(ctx context.Context, store storage.Store, info *topicmeta.Info) error {
	subs, err := NewRegistry(store, nil).Subjects(ctx, info.Topic)
	if err != nil {
		return fmt.Errorf("contracts of topic %s: %w", info.Topic, err)
	}
	info.Contracts = info.Contracts[:0]
	for _, s := range subs {
		c := topicmeta.Contract{Type: s.Type, Compatibility: string(s.Mode)}
		for _, v := range s.Versions {
			c.Versions = append(c.Versions, int(v.Version))
		}
		info.Contracts = append(info.Contracts, c)
	}
	return nil
}
