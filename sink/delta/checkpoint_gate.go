package delta

import (
	"context"
	"time"
)

// CheckpointGate lets the background checkpoints of the tables sharing it
// run one at a time, each followed by a pause as long as it took (at most
// a second), so that the writer's commits run alone at least half of the
// time while a run of checkpoints is written. Tables committed in step
// reach the checkpoint interval in the same batch; their checkpoints
// written at once would hold up the writer's next commits together (on
// one core, a commit back from fsync waits for the encoder's time slice).
type CheckpointGate struct{ turn chan struct{} }

// NewCheckpointGate returns an open gate.
func NewCheckpointGate() *CheckpointGate {
	return &CheckpointGate{turn: make(chan struct{}, 1)}
}

// enter waits for the gate's turn; a nil gate lets everything through.
func (g *CheckpointGate) enter(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave ends the turn of a checkpoint that began at start, after the pause.
func (g *CheckpointGate) leave(start time.Time) {
	if g == nil {
		return
	}
	time.Sleep(min(time.Since(start), time.Second))
	<-g.turn
}
