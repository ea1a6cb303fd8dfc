package sinktest

import (
	"testing"

	"github.com/deltabus/deltabus/sink"
)

func TestMemoryConformance(t *testing.T) {
	Run(t, func(t *testing.T) Harness {
		m := NewMemory()
		return Harness{
			Sink:   m,
			Reopen: func() sink.Sink { return m },
			IDs: func(_ *testing.T, topic string) []string {
				var ids []string
				for _, r := range m.Rows(topic) {
					ids = append(ids, r.ID)
				}
				return ids
			},
			Delete: func(_ *testing.T, topic string) { m.Delete(topic) },
			Source: func(appID string) sink.Sink { return m.Source(appID) },
			Group: func(_ *testing.T, name string, patterns ...string) string {
				m.Group("_group."+name, patterns...)
				return "_group." + name
			},
			RollBack: func(_ *testing.T, table string, n int) { m.RollBack(table, n) },
		}
	})
}
