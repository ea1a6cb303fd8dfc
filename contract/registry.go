package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// DefaultMode is the compatibility mode of a type whose mode was never set.
const DefaultMode = compat.Backward

// What a topic does with an event its contracts refuse (Policy.OnViolation).
const (
	DeadLetter = "dead-letter" // the default: the event goes to _dead_letter with the reason
	Hold       = "hold"        // the topic is held at the event until the registry admits it
)

// Policy is a topic's enforcement in the relay.
type Policy struct {
	// OnViolation is DeadLetter (the default, "") or Hold.
	OnViolation string `json:"onViolation,omitempty"`
	// Strict refuses event types that have no contract.
	Strict bool `json:"strict,omitempty"`
	// PseudonymizeKey stores a keyed hash of the topic's key column
	// instead of the key, for topics whose keys identify people (package
	// pii): the same key always gives the same hash, so partitioning and
	// per-key order still hold.
	PseudonymizeKey bool `json:"pseudonymizeKey,omitempty"`
}

// Holds reports whether the policy holds the topic on a violation.
func (p Policy) Holds() bool { return p.OnViolation == Hold }

// CheckPolicy reports a policy the registry would refuse.
func CheckPolicy(p Policy) error {
	switch p.OnViolation {
	case "", DeadLetter, Hold:
		return nil
	}
	return usererr.New(nil, "on-violation %q is invalid: use %s or %s", p.OnViolation, DeadLetter, Hold)
}

// Registry reads and writes the contracts kept in a store's catalog (see
// the package doc for the layout). It is safe for concurrent use, and so
// is a store shared by several processes: a version is written
// put-if-absent, so of two registrations of one version with different
// schemas exactly one lands.
type Registry struct {
	store   storage.Store
	metrics *Metrics
}

// NewRegistry returns the registry of store; m (nil: none) counts
// registrations.
func NewRegistry(store storage.Store, m *Metrics) *Registry {
	return &Registry{store: store, metrics: m}
}

// Registration is a schema to register as version Version of a type.
type Registration struct {
	Topic, Type string
	Version     int32
	Schema      []byte
	// Mode, when set, is the mode the registrant expects: the mode of a
	// type registered for the first time (DefaultMode when ""), and for a
	// type that has versions or a mode it must be that mode, else the
	// registration is refused (ErrModeDiffers): registering never changes
	// an existing type's mode, so naming a weaker one cannot get a schema
	// past the type's rules. Changing it is SetMode's own act.
	Mode compat.Mode
	// Draft is the draft a schema without "$schema" is read in (one of the
	// Draft constants; "" is DefaultDraft, draft-07). The schema is stored
	// naming it, so that it is read so ever after. A schema whose
	// "$schema" names another draft is refused.
	Draft string
}

// ErrModeDiffers refuses a registration that names another mode than its
// type's (Registration.Mode).
var ErrModeDiffers = errors.New("the registration names another compatibility mode than its type's")

// Outcome is what Register did.
type Outcome struct {
	// New is false when the version was already registered with this
	// schema: nothing was written.
	New bool
	// Mode is the type's mode after the registration; PrevMode what it was
	// ("" when the type had no mode set).
	Mode, PrevMode compat.Mode
	// ComparedWith are the versions the schema was judged against, oldest
	// first (the checker decides which ones its mode compares).
	ComparedWith []int32
	// Draft is the draft the version is read in; Declared says the schema
	// named it in "$schema", Legacy that the version was registered
	// without one before DefaultDraft was draft-07 (and is read as
	// LegacyDraft).
	Draft            string
	Declared, Legacy bool
	// PrevDraft is the draft of the latest version before this one ("" for
	// a type's first); PrevLegacy says it is a Legacy one.
	PrevDraft  string
	PrevLegacy bool
}

// IncompatibleError refuses a schema that breaks the type's compatibility
// mode; nothing was written.
type IncompatibleError struct {
	Topic, Type string
	Version     int32
	Mode        compat.Mode
	Differences []compat.Difference
}

func (e *IncompatibleError) Error() string {
	lines := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		lines[i] = d.String()
	}
	return fmt.Sprintf("version %d of %s/%s is incompatible under %s: %s", e.Version, e.Topic, e.Type, e.Mode, strings.Join(lines, "; "))
}

// CheckSubject reports a topic, type or version that cannot hold a
// contract, as a usererr.Error.
func CheckSubject(topic, typ string, version int32) error {
	if err := outbox.ValidTopic(topic); err != nil {
		return usererr.New(err, "%v; contracts are for topics producers write (not internal ones such as %s)", err, outbox.DeadLetterTopic)
	}
	if _, err := catalog.EncodeType(typ); err != nil {
		return usererr.New(err, "%v", err)
	}
	if version < 1 {
		return usererr.New(nil, "contract version %d is invalid: versions are positive integers, 1 for a type's first contract", version)
	}
	return nil
}

// ParseVersion parses a version given on a command line.
func ParseVersion(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 1 {
		return 0, usererr.New(err, "version %q is invalid: want a positive integer (1 for a type's first contract)", truncate(s, 40))
	}
	return int32(v), nil
}

// Register judges reg's schema against the type's registered versions
// under its mode and, when compatible, writes it. A version is
// registered once: registering an equal schema again is a no-op
// (Outcome.New false), a different one is refused. Versions are
// contiguous: a type's first version is 1, and each next one is the
// latest plus one, so the versions a new one is judged against are all
// there and can never change. Errors: *usererr.Error for bad input (a
// malformed schema, a reserved topic, a gap, a version taken by another
// schema), *IncompatibleError, or a store error.
func (r *Registry) Register(ctx context.Context, reg Registration) (Outcome, error) {
	out, err := r.judge(ctx, reg, true)
	topic, typ := reg.Topic, reg.Type
	if CheckSubject(topic, typ, 1) != nil {
		topic, typ = "(invalid)", "(invalid)" // never a label from input the registry refused
	}
	r.metrics.registration(topic, typ, outcomeOf(out, err))
	return out, err
}

// Judge is Register without writing anything: what Register would answer.
func (r *Registry) Judge(ctx context.Context, reg Registration) (Outcome, error) {
	return r.judge(ctx, reg, false)
}

func (r *Registry) judge(ctx context.Context, reg Registration, write bool) (Outcome, error) {
	if err := CheckSubject(reg.Topic, reg.Type, reg.Version); err != nil {
		return Outcome{}, err
	}
	next, err := CompileAs(reg.Topic, reg.Type, reg.Version, reg.Schema, reg.Draft)
	if err != nil {
		return Outcome{}, usererr.New(err, "%v", err)
	}
	// What is stored names the draft it is read in (WithDraft).
	stored := WithDraft(reg.Schema, next.Draft)
	if len(stored) > MaxSchemaBytes {
		return Outcome{}, usererr.New(nil, "schema is %d bytes with its $schema, the limit is %d", len(stored), MaxSchemaBytes)
	}
	sub, err := r.subject(ctx, reg.Topic, reg.Type)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Mode: sub.Mode, PrevMode: sub.Mode, Draft: next.Draft, Declared: next.Declared}
	if !sub.ModeSet {
		out.PrevMode = ""
	}
	newType := !sub.ModeSet && len(sub.Versions) == 0
	if reg.Mode != "" && reg.Mode != sub.Mode && !newType {
		return Outcome{}, modeDiffers(reg, sub.Mode)
	}
	if reg.Mode != "" {
		out.Mode = reg.Mode
	}
	latest := sub.Latest()
	switch {
	case reg.Version <= latest:
		old, err := r.Schema(ctx, reg.Topic, reg.Type, reg.Version)
		if err != nil {
			return Outcome{}, err
		}
		return r.same(ctx, reg, old, stored, out, write)
	case reg.Version != latest+1:
		return Outcome{}, usererr.New(nil, "version %d of %s/%s would leave a gap: the latest registered is %d; register version %d", reg.Version, reg.Topic, reg.Type, latest, latest+1)
	}
	prev := make([][]byte, 0, len(sub.Versions))
	for _, v := range sub.Versions {
		b, err := r.Schema(ctx, reg.Topic, reg.Type, v.Version)
		if err != nil {
			return Outcome{}, err
		}
		// Each version is judged in its own draft: a legacy one as
		// LegacyDraft, however the new one is read.
		prev = append(prev, readable(b))
		out.ComparedWith = append(out.ComparedWith, v.Version)
		out.PrevDraft, out.PrevLegacy = storedDraft(b)
	}
	var diffs []compat.Difference
	if len(prev) > 0 {
		diffs, err = compat.Check(out.Mode, prev, stored)
	}
	if err != nil {
		return Outcome{}, usererr.New(err, "cannot judge version %d of %s/%s under %s: %v", reg.Version, reg.Topic, reg.Type, out.Mode, err)
	}
	if len(prev) > 0 {
		diffs = append(diffs, personalDiffs(mustClassify(prev[len(prev)-1]), next.Personal())...)
	}
	if len(diffs) > 0 {
		return Outcome{}, &IncompatibleError{Topic: reg.Topic, Type: reg.Type, Version: reg.Version, Mode: out.Mode, Differences: diffs}
	}
	out.New = true
	if !write {
		return out, nil
	}
	if newType && reg.Mode != "" {
		if err := r.createMode(ctx, reg); err != nil {
			return Outcome{}, err
		}
	}
	key, _ := catalog.Key(catalog.KindContract, reg.Topic, reg.Type, itoa(reg.Version))
	if err := r.store.PutIfAbsent(ctx, key, stored); err != nil {
		if !errors.Is(err, storage.ErrExists) {
			return Outcome{}, fmt.Errorf("write contract %s/%s v%d: %w", reg.Topic, reg.Type, reg.Version, err)
		}
		// Another registration of this version landed first.
		old, err := r.Schema(ctx, reg.Topic, reg.Type, reg.Version)
		if err != nil {
			return Outcome{}, err
		}
		out.New = false
		return r.same(ctx, reg, old, stored, out, write)
	}
	return out, nil
}

// createMode writes the mode a new type's first registration names, before
// its schema, with the store's conditional write: of two first
// registrations naming different modes at once, one mode is the type's
// and the other registration is refused.
func (r *Registry) createMode(ctx context.Context, reg Registration) error {
	key, _ := catalog.Key(catalog.KindContractMode, reg.Topic, reg.Type)
	b, err := json.MarshalIndent(modeObject{Compatibility: reg.Mode, Changed: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	err = r.store.PutIfAbsent(ctx, key, append(b, '\n'))
	if !errors.Is(err, storage.ErrExists) {
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		return nil
	}
	var m modeObject
	if err := r.readJSON(ctx, key, &m); err != nil {
		return err
	}
	if m.Compatibility != reg.Mode {
		return modeDiffers(reg, m.Compatibility)
	}
	return nil
}

func modeDiffers(reg Registration, mode compat.Mode) error {
	return usererr.New(ErrModeDiffers, "%s/%s is judged under %s, not %s: registering never changes a type's compatibility mode; change it first, as its own act, with "+
		"`relay contract mode --topic %s --type %s --compatibility %s`, or register without --compatibility", reg.Topic, reg.Type, mode, reg.Mode, reg.Topic, reg.Type, reg.Mode)
}

func outcomeOf(out Outcome, err error) string {
	var ie *IncompatibleError
	switch {
	case errors.As(err, &ie):
		return "incompatible"
	case usererr.Is(err):
		return "refused"
	case err != nil:
		return "failed"
	case !out.New:
		return "unchanged"
	}
	return "registered"
}

// Subject is one type's contracts.
type Subject struct {
	Topic, Type string
	Mode        compat.Mode // DefaultMode unless set
	ModeSet     bool
	Versions    []Version // oldest first
}

// Latest is the newest version, 0 when none.
func (s Subject) Latest() int32 {
	if len(s.Versions) == 0 {
		return 0
	}
	return s.Versions[len(s.Versions)-1].Version
}

// Version is one registered version.
type Version struct {
	Version    int32     `json:"version"`
	Bytes      int64     `json:"bytes"`
	Registered time.Time `json:"registered"`
}

type modeObject struct {
	Compatibility compat.Mode `json:"compatibility"`
	Previous      compat.Mode `json:"previous,omitempty"` // the mode it replaced
	Changed       time.Time   `json:"changed,omitzero"`
}

func (r *Registry) subject(ctx context.Context, topic, typ string) (Subject, error) {
	subs, err := r.list(ctx, topic, typ)
	if err != nil {
		return Subject{}, err
	}
	for _, s := range subs {
		if s.Type == typ {
			return s, nil
		}
	}
	return Subject{Topic: topic, Type: typ, Mode: DefaultMode}, nil
}

// Subjects lists the types with contracts, of one topic or ("") all.
func (r *Registry) Subjects(ctx context.Context, topic string) ([]Subject, error) {
	return r.list(ctx, topic, "")
}

func (r *Registry) list(ctx context.Context, topic, typ string) ([]Subject, error) {
	prefix := catalog.Prefix + "contracts/"
	if topic != "" {
		if err := outbox.ValidTopic(topic); err != nil {
			return nil, usererr.New(err, "%v", err)
		}
		prefix += topic + "/"
		if typ != "" {
			seg, err := catalog.EncodeType(typ)
			if err != nil {
				return nil, usererr.New(err, "%v", err)
			}
			prefix += seg + "/"
		}
	}
	objs, err := r.store.List(ctx, prefix, "")
	if err != nil {
		return nil, fmt.Errorf("list contracts in %s: %w", r.store, err)
	}
	idx := buildIndex(objs)
	var out []Subject
	for _, k := range idx.order {
		sub := idx.subjects[k]
		s := Subject{Topic: k.topic, Type: k.typ, Mode: DefaultMode, Versions: sub.versions}
		if sub.modeKey != "" {
			var m modeObject
			if err := r.readJSON(ctx, sub.modeKey, &m); err != nil {
				return nil, err
			}
			if _, err := compat.ParseMode(string(m.Compatibility)); err == nil {
				s.Mode, s.ModeSet = m.Compatibility, true
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// Schema returns a registered schema: version v, or the latest when v is 0.
// An unregistered one is a usererr.Error.
func (r *Registry) Schema(ctx context.Context, topic, typ string, v int32) ([]byte, error) {
	v, err := r.versionOrLatest(ctx, topic, typ, v)
	if err != nil {
		return nil, err
	}
	key, err := catalog.Key(catalog.KindContract, topic, typ, itoa(v))
	if err != nil {
		return nil, usererr.New(err, "%v", err)
	}
	b, err := r.store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, usererr.New(nil, "event type %q of topic %q has no contract version %d", truncate(typ, 80), topic, v)
	}
	if err != nil {
		return nil, fmt.Errorf("read contract %s/%s v%d: %w", topic, typ, v, err)
	}
	return b, nil
}

// versionOrLatest is v, or the type's latest version when v is 0.
func (r *Registry) versionOrLatest(ctx context.Context, topic, typ string, v int32) (int32, error) {
	if v != 0 {
		return v, nil
	}
	s, err := r.subject(ctx, topic, typ)
	if err != nil {
		return 0, err
	}
	if v = s.Latest(); v == 0 {
		return 0, usererr.New(nil, "event type %q of topic %q has no contract", truncate(typ, 80), topic)
	}
	return v, nil
}

// SetMode sets a type's compatibility mode (the next registrations are
// judged under it): the only way an existing type's mode changes. The
// mode object records the mode it replaced and when; it returns that
// previous mode (DefaultMode when none was set).
func (r *Registry) SetMode(ctx context.Context, topic, typ string, mode compat.Mode) (compat.Mode, error) {
	if err := CheckSubject(topic, typ, 1); err != nil {
		return "", err
	}
	if _, err := compat.ParseMode(string(mode)); err != nil {
		return "", usererr.New(err, "%v", err)
	}
	sub, err := r.subject(ctx, topic, typ)
	if err != nil {
		return "", err
	}
	key, _ := catalog.Key(catalog.KindContractMode, topic, typ)
	return sub.Mode, r.writeJSON(ctx, key, modeObject{Compatibility: mode, Previous: sub.Mode, Changed: time.Now().UTC()})
}

// Policy returns a topic's policy (the zero Policy when none is set).
func (r *Registry) Policy(ctx context.Context, topic string) (Policy, error) {
	key, err := catalog.Key(catalog.KindContractPolicy, topic)
	if err != nil {
		return Policy{}, usererr.New(err, "%v", err)
	}
	var p Policy
	if err := r.readJSON(ctx, key, &p); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return Policy{}, err
	}
	return p, nil
}

// SetPolicy sets a topic's policy. The relay follows it within its poll
// interval.
func (r *Registry) SetPolicy(ctx context.Context, topic string, p Policy) error {
	if err := outbox.ValidTopic(topic); err != nil {
		return usererr.New(err, "%v", err)
	}
	if err := CheckPolicy(p); err != nil {
		return err
	}
	if p.OnViolation == DeadLetter {
		p.OnViolation = ""
	}
	key, _ := catalog.Key(catalog.KindContractPolicy, topic)
	return r.writeJSON(ctx, key, p)
}

func (r *Registry) readJSON(ctx context.Context, key string, v any) error {
	b, err := r.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s in %s is corrupt: %w", key, r.store, err)
	}
	return nil
}

func (r *Registry) writeJSON(ctx context.Context, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := r.store.Put(ctx, key, append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }

// subjectKey names a type of a topic.
type subjectKey struct{ topic, typ string }

// listing is what one List of the contracts folder shows.
type listing struct {
	subjects map[subjectKey]*listed
	order    []subjectKey // as listed: by topic, then by encoded type
	policies map[string]storage.Object
}

type listed struct {
	key      subjectKey // its names, owned
	versions []Version
	objs     map[int32]storage.Object
	modeKey  string
}

// buildIndex reads a listing of contract objects. Keys that do not parse
// (stray objects) are left out: a name read from the store never becomes a
// key unchecked.
func buildIndex(objs []storage.Object) *listing {
	l := &listing{subjects: map[subjectKey]*listed{}, policies: map[string]storage.Object{}}
	for _, o := range objs {
		kind, names, ok := catalog.Parse(o.Key)
		if !ok {
			continue
		}
		switch kind {
		case catalog.KindContractPolicy:
			l.policies[names[0]] = o
			continue
		case catalog.KindContractMode, catalog.KindContract:
		default:
			continue
		}
		k := subjectKey{names[0], names[1]}
		s := l.subjects[k]
		if s == nil {
			s = &listed{key: k, objs: map[int32]storage.Object{}}
			l.subjects[k] = s
			l.order = append(l.order, k)
		}
		if kind == catalog.KindContractMode {
			s.modeKey = o.Key
			continue
		}
		v, _ := strconv.ParseInt(names[2], 10, 32)
		s.objs[int32(v)] = o
		s.versions = append(s.versions, Version{Version: int32(v), Bytes: o.Size, Registered: o.ModTime})
	}
	for _, s := range l.subjects {
		slices.SortFunc(s.versions, func(a, b Version) int { return int(a.Version) - int(b.Version) })
	}
	return l
}
