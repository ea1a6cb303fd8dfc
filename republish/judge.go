package republish

import (
	"context"
	"fmt"
	"strings"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/storage"
)

// judge decides, as the relay's stream does where a row becomes an event,
// whether an event may enter its topic: a valid public topic name, a table
// its source's relay could append to (sink.Topic's status as that relay's
// sink sees it, claims included), its contract (contract.Cache.Judge, the
// one judgement of every path that writes events), and its personal data
// (pii.Protector.Event encrypts the marked fields, or refuses the event
// as the stream would dead-letter it). An event the contract refuses is
// refused whatever the topic's policy: holding is the stream's answer, a
// run reports it.
type judge struct {
	root      storage.Store
	contracts *contract.Cache
	protector *pii.Protector
	scratch   pii.Scratch
	tables    map[groupKey]string // (topic, source) -> why its table takes no events ("" = it does)
}

// refusal returns why ev may not enter its topic ("" when it may). ev's
// payload (and key, on topics that pseudonymise it) is protected in place.
// err means the registry or a key could not be had: retry later.
func (j *judge) refusal(ctx context.Context, ev *outbox.Event) (string, error) {
	if err := outbox.ValidTopic(ev.Topic); err != nil {
		return fmt.Sprintf("invalid topic name %q: %v", ev.Topic, err), nil
	}
	if why, err := j.table(ctx, ev.Topic, ev.Source); why != "" || err != nil {
		return why, err
	}
	if c := j.contracts; c != nil {
		v, err := c.Judge(ctx, ev)
		if err != nil {
			return "", fmt.Errorf("check event %s of topic %q against its contract: %w", ev.ID, ev.Topic, err)
		}
		if !v.Passes() {
			return v.Violation.Error(), nil
		}
	}
	if p := j.protector; p != nil {
		dl, err := p.Event(ctx, ev, &j.scratch)
		if err != nil {
			return "", fmt.Errorf("personal data of event %s of topic %q cannot be encrypted: %w", ev.ID, ev.Topic, err)
		}
		if dl != nil {
			return dl.Reason, nil
		}
		ev.Payload = strings.Clone(ev.Payload) // it aliases the scratch
	}
	return "", nil
}

// table returns why the topic's table takes no events of source now,
// once per (topic, source).
func (j *judge) table(ctx context.Context, name, source string) (string, error) {
	k := groupKey{name, source}
	if why, ok := j.tables[k]; ok {
		return why, nil
	}
	why, err := tableRefusal(ctx, j.root, source, name)
	if err != nil {
		return "", err
	}
	j.tables[k] = why
	return why, nil
}

// tableRefusal says why events may not be appended to the topic's table
// now: a table the relay would not write (missing although registered,
// another writer's, changed incompatibly), or a rebuild in progress,
// which copies the topic's events itself and holds them meanwhile.
func tableRefusal(ctx context.Context, root storage.Store, source, name string) (string, error) {
	states, err := catalog.ListRebuildStates(ctx, root, name)
	if err != nil {
		return "", err
	}
	for _, st := range states {
		if st.Paused != "" && catalog.CheckID(st.Paused) == nil {
			return fmt.Sprintf("topic %q is paused for rebuild %s (relay %s): publish it again once the rebuild is committed", name, st.Paused, st.AppID), nil
		}
	}
	if catalog.CheckName("relay", source) != nil {
		return fmt.Sprintf("the event names no source relay (%q): it cannot be published as any source's", source), nil
	}
	t, err := openTopic(ctx, root, source, name)
	if err != nil {
		return "", err
	}
	switch t.Status {
	case sink.Missing:
		return fmt.Sprintf("topic %q: %s; restore it first (relay rebuild --topic %s)", name, t.Reason, name), nil
	case sink.Foreign, sink.Incompatible:
		return fmt.Sprintf("topic %q: %s table: %s", name, t.Status, t.Reason), nil
	}
	return "", nil
}
