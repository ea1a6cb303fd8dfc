// Package consume is the body of `relay consume`: a subscription that
// prints each event as one JSON line, payload and headers as nested JSON,
// and checkpoints the group in the DeltaBus store or in PostgreSQL. Every
// line is written and flushed before the checkpoint that covers it is
// committed, so the output is at least once: after a crash the last batch
// may be printed again (deduplicate by event_id).
//
// With Config.Contracts (relay consume --validate) each event is checked
// against its contract before it is printed: an event its contract refuses
// is still printed, with the violation in the line's contract_violation
// field and logged, and Run then ends with a *ViolationsError (the command
// exits 1), so a pipeline notices.
package consume

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
)

// Config is what `relay consume` parsed.
type Config struct {
	Store        storage.Store
	Topic, Group string
	Follow       bool
	// Reset, when set, moves the group's checkpoint there before reading
	// (--from-version, --from-time): a replay.
	Reset *subscribe.Start
	// CheckpointDSN, when set, keeps the checkpoint in that PostgreSQL
	// database (table pgcheckpoint.DefaultTable) instead of the store.
	CheckpointDSN string
	BatchSize     int
	PollInterval  time.Duration
	Logger        *slog.Logger
	// Contracts, when set, checks every event against its contract.
	Contracts *contract.Cache
	// Reveal, when set, decrypts personal fields (subscribe.Options.Reveal);
	// each line then lists the erased fields' pointers in "erased", and
	// those whose envelope does not open in "unreadable".
	Reveal *pii.Revealer
}

// ViolationsError ends a consume that printed events their contracts
// refuse.
type ViolationsError struct {
	Count int
	First string // the first violation, with its event
}

func (e *ViolationsError) Error() string {
	return fmt.Sprintf("%d events printed break their contracts (each line's contract_violation says why); the first: %s", e.Count, e.First)
}

// Run consumes until caught up (or until ctx ends with Follow; that is not
// an error).
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	cps, closeCPs, err := checkpoints(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeCPs()
	if cfg.Reset != nil {
		cp, err := subscribe.Reset(ctx, cfg.Store, cps, cfg.Topic, cfg.Group, *cfg.Reset)
		if err != nil {
			return err
		}
		logger(cfg).Info("consume: group reset", "group", cfg.Group, "topic", cfg.Topic, "position", cp.Position.String())
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var bad ViolationsError
	h := func(ctx context.Context, b *subscribe.Batch) error {
		for i := range b.Events {
			e := &b.Events[i]
			violation := ""
			if cfg.Contracts != nil {
				v, err := cfg.Contracts.Check(ctx, e.Topic, e.Type, e.SchemaVersion, []byte(e.Payload))
				if err != nil {
					return err
				}
				if v != nil {
					violation = v.Error()
					if bad.Count++; bad.Count == 1 {
						bad.First = fmt.Sprintf("event %s (%s): %s", e.ID, e.Position, violation)
					}
					logger(cfg).Warn("consume: event breaks its contract", "event_id", e.ID, "version", e.Version, "offset", e.Offset, "violation", violation)
				}
			}
			if err := writeLine(bw, e, violation); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	err = subscribe.Subscribe(ctx, cfg.Store, cfg.Topic, cfg.Group, h, subscribe.Options{
		Checkpoints: cps, Follow: cfg.Follow, BatchSize: cfg.BatchSize, PollInterval: cfg.PollInterval, Logger: cfg.Logger,
		Reveal: cfg.Reveal})
	if cfg.Follow && ctx.Err() != nil {
		err = nil
	}
	if err == nil && bad.Count > 0 {
		return &bad
	}
	return err
}

func logger(cfg Config) *slog.Logger {
	if cfg.Logger != nil {
		return cfg.Logger
	}
	return slog.Default()
}

func checkpoints(ctx context.Context, cfg Config) (subscribe.Checkpoints, func(), error) {
	if cfg.CheckpointDSN == "" {
		return subscribe.NewStoreCheckpoints(cfg.Store), func() {}, nil
	}
	pool, err := pgsource.NewPool(ctx, cfg.CheckpointDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("--checkpoint: %w", err)
	}
	s, err := pgcheckpoint.Open(ctx, pool, "")
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("--checkpoint: cannot use the checkpoint table: %w", err)
	}
	return s, pool.Close, nil
}

// line is the JSON form of one event: subscribe.EventJSON, and the
// contract violation --validate found.
type line struct {
	subscribe.EventJSON
	// ContractViolation is set by --validate for an event its contract
	// refuses.
	ContractViolation string `json:"contract_violation,omitempty"`
}

// WriteLine writes e as one JSON line (subscribe.EventJSON).
func WriteLine(w io.Writer, e *subscribe.Event) error { return writeLine(w, e, "") }

func writeLine(w io.Writer, e *subscribe.Event, violation string) error {
	b, err := json.Marshal(line{EventJSON: subscribe.NewEventJSON(e), ContractViolation: violation})
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
