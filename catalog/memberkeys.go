package catalog

import (
	"fmt"
	"strconv"
	"strings"
)

// A consumer group served to parallel members (package subscribe/members)
// keeps its shared state under members/<group>/<topic>/: a log of entries
// written put-if-absent, one per state change, snapshots of the state at
// an entry, the operator's protection of the group against retention and
// the maintainer's record of a hold it keeps.
const (
	KindMemberEntry    Kind = "member-entry"    // members/<group>/<topic>/log/<seq, 20 digits>.json
	KindMemberSnapshot Kind = "member-snapshot" // members/<group>/<topic>/snapshots/<seq, 20 digits>.json
	KindMemberProtect  Kind = "member-protect"  // members/<group>/<topic>/protect.json
	KindMemberHold     Kind = "member-hold"     // members/<group>/<topic>/hold.json
	// KindUpcast is a declarative upcaster: a JSON Patch turning a
	// payload of (topic, event type) from a version into the next, applied
	// for members that read the newer one. Names: topic, type (encoded by
	// EncodeType), version.
	KindUpcast Kind = "upcast" // upcasts/<topic>/<type>/<from version, 10 digits>.json
)

// UpcastsPrefix is the folder of every declarative upcaster.
const UpcastsPrefix = Prefix + "upcasts/"

// MembersPrefix is the folder of every members group's state.
const MembersPrefix = Prefix + "members/"

// seqDigits is the width of a member entry's or snapshot's sequence
// number: zero padded, so a listing returns them in order.
const seqDigits = 20

// MemberDir returns the folder of a members group's state in topic, with
// its trailing "/": list it to find entries and snapshots.
func MemberDir(group, topic string) (string, error) {
	if err := CheckName("consumer group", group); err != nil {
		return "", err
	}
	if err := CheckName("topic", topic); err != nil {
		return "", err
	}
	return MembersPrefix + group + "/" + topic + "/", nil
}

// MemberLogDir and MemberSnapshotDir are the folders of the entries and
// the snapshots under MemberDir.
const (
	MemberLogDir      = "log/"
	MemberSnapshotDir = "snapshots/"
)

func isMemberKind(k Kind) bool {
	return k == KindMemberEntry || k == KindMemberSnapshot || k == KindMemberProtect || k == KindMemberHold || k == KindUpcast
}

// memberKey is Key for the member kinds.
func memberKey(kind Kind, names []string) (string, error) {
	if kind == KindUpcast {
		if err := CheckName("topic", names[0]); err != nil {
			return "", err
		}
		typ, err := EncodeType(names[1])
		if err != nil {
			return "", err
		}
		v, err := versionSegment(names[2])
		if err != nil {
			return "", err
		}
		return UpcastsPrefix + names[0] + "/" + typ + "/" + v + ".json", nil
	}
	dir, err := MemberDir(names[0], names[1])
	if err != nil {
		return "", err
	}
	switch kind {
	case KindMemberProtect:
		return dir + "protect.json", nil
	case KindMemberHold:
		return dir + "hold.json", nil
	}
	n, err := strconv.ParseInt(names[2], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != names[2] {
		return "", fmt.Errorf("member log sequence %q is invalid: want a non-negative integer", truncate(names[2]))
	}
	sub := MemberLogDir
	if kind == KindMemberSnapshot {
		sub = MemberSnapshotDir
	}
	return fmt.Sprintf("%s%s%0*d.json", dir, sub, seqDigits, n), nil
}

// parseMemberKey is Parse for keys under MembersPrefix and UpcastsPrefix
// (parts are the key's segments after Prefix).
func parseMemberKey(parts []string) (Kind, []string, bool) {
	if parts[0] == "upcasts" {
		if len(parts) != 4 {
			return "", nil, false
		}
		typ, err := DecodeType(parts[2])
		n, ok := strings.CutSuffix(parts[3], ".json")
		if err != nil || !ok || len(n) != versionDigits {
			return "", nil, false
		}
		v, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			return "", nil, false
		}
		return KindUpcast, []string{parts[1], typ, strconv.FormatInt(v, 10)}, true
	}
	switch {
	case len(parts) == 4 && parts[3] == "protect.json":
		return KindMemberProtect, parts[1:3], true
	case len(parts) == 4 && parts[3] == "hold.json":
		return KindMemberHold, parts[1:3], true
	case len(parts) == 5 && (parts[3] == strings.TrimSuffix(MemberLogDir, "/") || parts[3] == strings.TrimSuffix(MemberSnapshotDir, "/")):
		n, ok := strings.CutSuffix(parts[4], ".json")
		if !ok || len(n) != seqDigits {
			return "", nil, false
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return "", nil, false
		}
		kind := KindMemberEntry
		if parts[3]+"/" == MemberSnapshotDir {
			kind = KindMemberSnapshot
		}
		return kind, []string{parts[1], parts[2], strconv.FormatInt(v, 10)}, true
	}
	return "", nil, false
}
