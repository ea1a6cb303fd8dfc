package subscribe

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Upcaster converts one event type's payload from a version to the next.
type Upcaster func(payload json.RawMessage) (json.RawMessage, error)

// Upcasters lets a handler read every event of a type at the one version
// it was written for, whatever version its producers wrote: an event older
// than the version asked for (Want) is converted by the registered
// functions v→v+1, in order, before the batch reaches the handler; its
// SchemaVersion then says the version asked for and WriterVersion the
// producer's. An event newer than the version asked for stops the
// subscription with a *NewerVersionError (the handler was not written for
// it: deploy a consumer that reads it), unless PassNewer passes it as it
// is. Types never asked for pass as they are.
//
// A failing conversion, or a missing step, stops the subscription before
// the batch is handled, with the checkpoint before it, like a handler
// error. Register and Want are for setting up; an Upcasters in use by a
// subscription must not change.
type Upcasters struct {
	types map[string]*upcastType
	// PassNewer hands events newer than the version asked for to the
	// handler as they are, instead of stopping.
	PassNewer bool
}

type upcastType struct {
	want  int32
	steps map[int32]Upcaster
}

// NewUpcasters returns an empty set.
func NewUpcasters() *Upcasters { return &Upcasters{types: map[string]*upcastType{}} }

func (u *Upcasters) typ(name string) *upcastType {
	t := u.types[name]
	if t == nil {
		t = &upcastType{steps: map[int32]Upcaster{}}
		u.types[name] = t
	}
	return t
}

// Register adds f, which turns version from of typ into version from+1.
func (u *Upcasters) Register(typ string, from int32, f Upcaster) *Upcasters {
	u.typ(typ).steps[from] = f
	return u
}

// Want says the handler reads typ at version v.
func (u *Upcasters) Want(typ string, v int32) *Upcasters {
	u.typ(typ).want = v
	return u
}

// check reports a set that cannot convert what it asks for.
func (u *Upcasters) check() error {
	for name, t := range u.types {
		if t.want < 1 {
			return fmt.Errorf("upcasters of type %q: no version asked for (Upcasters.Want)", name)
		}
		for from := range t.steps {
			if from < 1 || from >= t.want {
				return fmt.Errorf("upcasters of type %q: a step from version %d, but the handler asks for version %d", name, from, t.want)
			}
		}
	}
	return nil
}

// Apply converts the events of evs in place, as a subscription does
// before each batch: for handing events over by other means (package
// subscribe/members).
func (u *Upcasters) Apply(evs []Event) error {
	if u != nil {
		if err := u.check(); err != nil {
			return err
		}
	}
	return u.apply(evs)
}

// apply converts the events of evs in place.
func (u *Upcasters) apply(evs []Event) error {
	if u == nil {
		return nil
	}
	for i := range evs {
		e := &evs[i]
		t := u.types[e.Type]
		if t == nil || e.SchemaVersion == t.want {
			continue
		}
		if e.SchemaVersion > t.want {
			if u.PassNewer {
				continue
			}
			return &NewerVersionError{ID: e.ID, Type: e.Type, Version: e.SchemaVersion, Want: t.want, Position: e.Position}
		}
		p := json.RawMessage(e.Payload)
		for v := e.SchemaVersion; v < t.want; v++ {
			f := t.steps[v]
			if f == nil {
				return fmt.Errorf("event %s (%s) of type %q is version %d and the handler reads version %d, but no upcaster turns version %d into %d",
					e.ID, e.Position, e.Type, e.WriterVersion, t.want, v, v+1)
			}
			out, err := f(p)
			if err != nil {
				return fmt.Errorf("upcast event %s (%s) of type %q from version %d to %d: %w", e.ID, e.Position, e.Type, v, v+1, err)
			}
			if !json.Valid(out) {
				return fmt.Errorf("upcast event %s (%s) of type %q from version %d to %d: the upcaster returned invalid JSON", e.ID, e.Position, e.Type, v, v+1)
			}
			p = out
		}
		e.Payload, e.SchemaVersion = string(p), t.want
	}
	return nil
}

// NewerVersionError stops a subscription at an event newer than the
// version its handler reads (Upcasters.PassNewer passes it instead).
type NewerVersionError struct {
	ID, Type      string
	Version, Want int32
	Position      Position
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("event %s (%s) of type %q is version %d, newer than the version %d this handler reads: deploy a consumer that reads it, or pass newer events as they are (Upcasters.PassNewer)",
		e.ID, e.Position, e.Type, e.Version, e.Want)
}

var errUpcastColumns = errors.New("subscribe: Options.Upcasters converts Events: it cannot be combined with Options.Columns, which hands the columns as stored")
