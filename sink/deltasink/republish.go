package deltasink

import (
	"context"

	"github.com/deltabus/deltabus/sink/delta"
)

// Republish commits data files written elsewhere to the topic's table as
// one blind append at position pos, as CommitFiles does (creating and
// registering the table when the topic has none), for events published
// outside the stream (package republish): the sink's appId is then a
// catalog.RepublishAppID, pos the next value of its counter. params go to
// commitInfo's operationParameters (JSON-encoded strings), and conflict
// judges every commit that wins a version from this one: its error stops
// the commit, nothing written. It fails with sink.ErrFenced (wrapped) when
// another run moved the counter to pos or beyond first.
func (s *Sink) Republish(ctx context.Context, name string, adds []delta.Add, pos int64, params map[string]string,
	conflict func(version int64, winner []delta.Action) error) (int64, error) {
	return s.commitFiles(ctx, name, pos, delta.CommitActions{Adds: adds, Operation: "WRITE", OperationParameters: params, Conflict: conflict})
}
