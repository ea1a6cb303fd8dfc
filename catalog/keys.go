package catalog

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Prefix is the folder of every catalog object in a store. Topic tables
// live beside it, at <topic>/; topic names cannot start with "_", so no
// topic table can be it.
const Prefix = "_deltabus/"

// Kind names one sort of catalog object.
type Kind string

// The kinds of catalog objects, with their keys (see the package doc).
const (
	KindTopic         Kind = "topic"          // topics/<topic>
	KindMarker        Kind = "marker"         // relays/<appId>.json
	KindRebuildRecord Kind = "rebuild-record" // rebuilds/<topic>/<appId>/record.json
	KindRebuildState  Kind = "rebuild-state"  // rebuilds/<topic>/<appId>/state.json
	KindIntent        Kind = "intent"         // rebuilds/<topic>/<appId>/intents/<id>.json
	KindConsumer      Kind = "consumer"       // consumers/<group>/<topic>.json
	KindProbe         Kind = "probe"          // probes/<appId>
	KindLease         Kind = "lease"          // leases/<holder>.json
	KindTopicMeta     Kind = "topic-meta"     // topicmeta/<topic>.json
	KindRegistration  Kind = "registration"   // unitycatalog/<appId>.json
	KindGroup         Kind = "group"          // groups/<group>.json
	KindFork          Kind = "fork"           // forks/<appId>/<timeline>.json
	KindResolved      Kind = "resolved"       // resolved/<appId>.json
	KindClaim         Kind = "claim"          // claims/<table>/<appId>.json
	KindRelease       Kind = "release"        // rebuilds/<topic>/<appId>/release.json
	KindRepublish     Kind = "republish"      // republish/<id>.json
	// Event contracts (package contract): the names are the topic, the
	// event type (any text, encoded by EncodeType) and the version.
	KindContractPolicy Kind = "contract-policy" // contracts/<topic>/policy.json
	KindContractMode   Kind = "contract-mode"   // contracts/<topic>/<type>/mode.json
	KindContract       Kind = "contract"        // contracts/<topic>/<type>/<version, 10 digits>.json
)

// name is the form of every name that becomes one key segment: topics
// (including internal ones such as _dead_letter), relay appIds and consumer
// groups. It has no "/" and is never "." or "..", so a segment is always
// one segment; ids are lowercase hex. The lengths are checked apart: a
// bounded repetition ({0,127}) compiles to a program of 128 copies, a
// millisecond of every start of every command.
var (
	name = regexp.MustCompile(`^[a-z0-9_][a-z0-9._-]*$`)
	id   = regexp.MustCompile(`^[0-9a-f]*$`)
)

// CheckName reports whether s can name a topic, relay or consumer group in
// the catalog: 1-128 characters of a-z, 0-9, '.', '_', '-', not starting
// with '.' or '-'.
func CheckName(what, s string) error {
	if len(s) > 128 || !name.MatchString(s) {
		return fmt.Errorf("%s name %q is invalid: use 1-128 characters of a-z, 0-9, '.', '_' and '-', starting with a letter, digit or '_'", what, truncate(s))
	}
	return nil
}

// CheckID reports whether s can be a rebuild or intent id.
func CheckID(s string) error {
	if len(s) < 8 || len(s) > 64 || !id.MatchString(s) {
		return fmt.Errorf("id %q is invalid: want 8-64 lowercase hex digits", truncate(s))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// arity is the number of names a key of kind k takes.
func arity(k Kind) int {
	switch k {
	case KindRebuildRecord, KindRebuildState, KindConsumer, KindContractMode, KindFork, KindClaim, KindRelease:
		return 2
	case KindIntent, KindContract, KindMemberEntry, KindMemberSnapshot, KindUpcast:
		return 3
	case KindMemberProtect, KindMemberHold:
		return 2
	}
	return 1
}

// Key returns the store key of a catalog object. names are, in order: the
// topic (topic, contract policy), the topic and the appId (rebuild record
// and state), the appId (marker), the topic, the appId and the id
// (intent), the group and the topic (consumer), the table and the appId
// (claim), the topic and the event
// type (contract mode), the topic, the event type and the version
// (contract), the group, the topic and, for an entry or a snapshot, its
// sequence number (the member kinds). It panics on a wrong count and returns an error for an
// invalid name, so a hostile name can never address another object.
func Key(kind Kind, names ...string) (string, error) {
	if len(names) != arity(kind) {
		panic(fmt.Sprintf("catalog.Key(%s): %d names, want %d", kind, len(names), arity(kind)))
	}
	if isMemberKind(kind) {
		return memberKey(kind, names)
	}
	var typeSeg, version string
	for i, n := range names {
		var err error
		switch {
		case kind == KindIntent && i == 2, kind == KindRepublish:
			err = CheckID(n)
		case (kind == KindContract || kind == KindContractMode) && i == 1:
			typeSeg, err = EncodeType(n)
		case kind == KindContract && i == 2:
			version, err = versionSegment(n)
		default:
			err = CheckName(string(kind), n)
		}
		if err != nil {
			return "", err
		}
	}
	switch kind {
	case KindContractPolicy:
		return Prefix + "contracts/" + names[0] + "/policy.json", nil
	case KindContractMode:
		return Prefix + "contracts/" + names[0] + "/" + typeSeg + "/mode.json", nil
	case KindContract:
		return Prefix + "contracts/" + names[0] + "/" + typeSeg + "/" + version + ".json", nil
	case KindTopic:
		return Prefix + "topics/" + names[0], nil
	case KindMarker:
		return Prefix + "relays/" + names[0] + ".json", nil
	case KindRebuildRecord:
		return Prefix + "rebuilds/" + names[0] + "/" + names[1] + "/record.json", nil
	case KindRebuildState:
		return Prefix + "rebuilds/" + names[0] + "/" + names[1] + "/state.json", nil
	case KindIntent:
		return Prefix + "rebuilds/" + names[0] + "/" + names[1] + "/intents/" + names[2] + ".json", nil
	case KindConsumer:
		return Prefix + "consumers/" + names[0] + "/" + names[1] + ".json", nil
	case KindProbe:
		return Prefix + "probes/" + names[0], nil
	case KindLease:
		return Prefix + "leases/" + names[0] + ".json", nil
	case KindTopicMeta:
		return Prefix + "topicmeta/" + names[0] + ".json", nil
	case KindRegistration:
		return Prefix + "unitycatalog/" + names[0] + ".json", nil
	case KindGroup:
		return Prefix + "groups/" + names[0] + ".json", nil
	case KindFork:
		return Prefix + "forks/" + names[0] + "/" + names[1] + ".json", nil
	case KindResolved:
		return Prefix + "resolved/" + names[0] + ".json", nil
	case KindClaim:
		return Prefix + "claims/" + names[0] + "/" + names[1] + ".json", nil
	case KindRelease:
		return Prefix + "rebuilds/" + names[0] + "/" + names[1] + "/release.json", nil
	case KindRepublish:
		return Prefix + "republish/" + names[0] + ".json", nil
	}
	panic("catalog.Key: unknown kind " + string(kind))
}

// Parse is Key's inverse: the kind and names of a catalog key, ok=false for
// any other key. Parse(Key(k, n...)) == (k, n) for every valid input, which
// is what makes two different objects' keys different.
func Parse(key string) (kind Kind, names []string, ok bool) {
	rest, found := strings.CutPrefix(key, Prefix)
	if !found {
		return "", nil, false
	}
	parts := strings.Split(rest, "/")
	if parts[0] == "members" || parts[0] == "upcasts" {
		if kind, names, ok = parseMemberKey(parts); !ok {
			return "", nil, false
		}
		if k, err := Key(kind, names...); err != nil || k != key {
			return "", nil, false
		}
		return kind, names, true
	}
	json := func(s string) (string, bool) { return strings.CutSuffix(s, ".json") }
	switch {
	case len(parts) == 2 && parts[0] == "topics":
		kind, names = KindTopic, []string{parts[1]}
	case len(parts) == 2 && parts[0] == "probes":
		kind, names = KindProbe, []string{parts[1]}
	case len(parts) == 2 && parts[0] == "leases":
		n, sfx := json(parts[1])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindLease, []string{n}
	case len(parts) == 2 && (parts[0] == "topicmeta" || parts[0] == "unitycatalog" || parts[0] == "groups" || parts[0] == "resolved" || parts[0] == "republish"):
		n, sfx := json(parts[1])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindTopicMeta, []string{n}
		switch parts[0] {
		case "unitycatalog":
			kind = KindRegistration
		case "groups":
			kind = KindGroup
		case "resolved":
			kind = KindResolved
		case "republish":
			kind = KindRepublish
		}
	case len(parts) == 2 && parts[0] == "relays":
		n, sfx := json(parts[1])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindMarker, []string{n}
	case len(parts) == 4 && parts[0] == "rebuilds" && parts[3] == "record.json":
		kind, names = KindRebuildRecord, []string{parts[1], parts[2]}
	case len(parts) == 4 && parts[0] == "rebuilds" && parts[3] == "state.json":
		kind, names = KindRebuildState, []string{parts[1], parts[2]}
	case len(parts) == 4 && parts[0] == "rebuilds" && parts[3] == "release.json":
		kind, names = KindRelease, []string{parts[1], parts[2]}
	case len(parts) == 5 && parts[0] == "rebuilds" && parts[3] == "intents":
		n, sfx := json(parts[4])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindIntent, []string{parts[1], parts[2], n}
	case len(parts) == 3 && parts[0] == "contracts" && parts[2] == "policy.json":
		kind, names = KindContractPolicy, []string{parts[1]}
	case len(parts) == 4 && parts[0] == "contracts":
		typ, err := DecodeType(parts[2])
		if err != nil {
			return "", nil, false
		}
		if parts[3] == "mode.json" {
			kind, names = KindContractMode, []string{parts[1], typ}
			break
		}
		n, sfx := json(parts[3])
		v, err := strconv.ParseInt(n, 10, 32)
		if !sfx || err != nil || len(n) != versionDigits {
			return "", nil, false
		}
		kind, names = KindContract, []string{parts[1], typ, strconv.FormatInt(v, 10)}
	case len(parts) == 3 && parts[0] == "claims":
		n, sfx := json(parts[2])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindClaim, []string{parts[1], n}
	case len(parts) == 3 && parts[0] == "consumers":
		n, sfx := json(parts[2])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindConsumer, []string{parts[1], n}
	case len(parts) == 3 && parts[0] == "forks":
		n, sfx := json(parts[2])
		if !sfx {
			return "", nil, false
		}
		kind, names = KindFork, []string{parts[1], n}
	default:
		return "", nil, false
	}
	if k, err := Key(kind, names...); err != nil || k != key {
		return "", nil, false
	}
	return kind, names, true
}
