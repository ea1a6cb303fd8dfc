package catalog

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Source is the identity of what one relay reads: a replication slot of one
// database of one PostgreSQL cluster. A physical standby promoted in the
// primary's place keeps the cluster's system identifier, so it is the same
// source; any other cluster is another one, whatever its slot is called.
type Source struct {
	SystemID string `json:"systemId"` // pg_control_system().system_identifier, decimal
	Database string `json:"database"`
	Slot     string `json:"slot"`
}

var systemIDForm = regexp.MustCompile(`^[0-9]{1,20}$`)

// Check reports whether s is complete and well formed.
func (s Source) Check() error {
	switch {
	case !systemIDForm.MatchString(s.SystemID):
		return fmt.Errorf("source system identifier %q is not a decimal number", truncate(s.SystemID))
	case s.Database == "":
		return fmt.Errorf("source has no database name")
	case CheckName("slot", s.Slot) != nil:
		return fmt.Errorf("source slot name %q is invalid", truncate(s.Slot))
	}
	return nil
}

// AppID is the Delta txn appId (and marker name) of the relay that reads
// s: "deltabus-<system identifier>-<slot>". Two clusters never share one,
// whatever their slot names; one cluster holds one slot of a name at a
// time, and the marker records which database it belongs to.
func (s Source) AppID() string { return "deltabus-" + s.SystemID + "-" + s.Slot }

// String names the source for operators: "system 7301… database orders slot deltabus".
func (s Source) String() string {
	return fmt.Sprintf("system %s database %q slot %s", s.SystemID, s.Database, s.Slot)
}

// Same reports whether two markers' sources are one source.
func (s Source) Same(o Source) bool {
	return s.SystemID == o.SystemID && s.Database == o.Database && s.Slot == o.Slot
}

// LegacyAppID is the appId releases before source identity used for
// every relay on a slot name, whichever database it read: "deltabus-<slot>".
// A relay whose source matches that marker's takes its progress over
// (ResolveAppID).
func LegacyAppID(slot string) string { return "deltabus-" + slot }

// isLegacy reports whether appID has the legacy form of slot.
func isLegacy(appID, slot string) bool { return appID == LegacyAppID(slot) }

// Identity is the outcome of ResolveAppID: the appId under which a
// source's progress is kept in a store, and its marker if it has one.
type Identity struct {
	Source Source
	AppID  string
	Marker *Marker // nil: no first start completed yet
	// Adopted: the progress is a legacy relay's (LegacyAppID) whose marker
	// names this source; it goes on under that appId.
	Adopted bool
}

// Legacy reports whether the identity uses a legacy appId, whose rebuild
// records and states may still be kept at the per-topic keys of the
// releases before source identity.
func (id Identity) Legacy() bool { return isLegacy(id.AppID, id.Source.Slot) }

// ResolveAppID decides which appId is src's in store, and refuses when the
// store's progress under that name cannot be proven to be src's:
//
//   - explicit (relay --app-id) is the operator's choice; its marker, if
//     any, must name src.
//   - A marker at src.AppID() must name src (the same cluster, slot and
//     database): a slot of that name re-created in another database of the
//     cluster is another source.
//   - Otherwise a legacy marker (LegacyAppID of the slot) that names src is
//     src's own progress from an older release: it is adopted and goes on
//     under the legacy appId. One that names another source is that
//     source's, never read as src's; src gets src.AppID(). One that names
//     no system identifier cannot be told apart: refused.
//   - No marker: src.AppID(), a first start.
func ResolveAppID(ctx context.Context, store storage.Store, src Source, explicit string) (Identity, error) {
	if err := src.Check(); err != nil {
		return Identity{}, err
	}
	id := Identity{Source: src, AppID: src.AppID()}
	if explicit != "" {
		id.AppID = explicit
		m, ok, err := ReadMarker(ctx, store, explicit)
		if err != nil || !ok {
			return id, err
		}
		if m.SystemID != "" && !m.Source().Same(src) {
			return id, refuse(store, explicit, m, src)
		}
		id.Marker = &m
		return id, nil
	}
	m, ok, err := ReadMarker(ctx, store, id.AppID)
	if err != nil {
		return id, err
	}
	if ok {
		if !m.Source().Same(src) {
			return id, refuse(store, id.AppID, m, src)
		}
		id.Marker = &m
		return id, nil
	}
	legacy := LegacyAppID(src.Slot)
	m, ok, err = ReadMarker(ctx, store, legacy)
	switch {
	case err != nil:
		return id, err
	case !ok:
		return id, nil
	case m.SystemID == "":
		return id, usererr.New(nil, "store %s holds progress of relay %q with no system identifier, so it cannot tell whether it is this source's (%s): if it is, start the relay with --app-id %s; if not, choose another --slot", store, legacy, src, legacy)
	case m.Source().Same(src):
		id.AppID, id.Marker, id.Adopted = legacy, &m, true
	}
	return id, nil
}

func refuse(store storage.Store, appID string, m Marker, src Source) error {
	return usererr.New(nil, "store %s keeps the progress of relay %q for %s, and this relay reads %s: it cannot be this source's; give this relay another --slot (or --app-id), or point it at its own store", store, appID, m.Source(), src)
}

// SourceOfAppID returns the source a new-form appId names, ok=false for
// any other appId (a legacy one, or an explicit --app-id).
func SourceOfAppID(appID string) (systemID, slot string, ok bool) {
	rest, found := strings.CutPrefix(appID, "deltabus-")
	if !found {
		return "", "", false
	}
	sys, slot, found := strings.Cut(rest, "-")
	if !found || !systemIDForm.MatchString(sys) || slot == "" {
		return "", "", false
	}
	return sys, slot, true
}
