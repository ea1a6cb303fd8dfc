package contract

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/usererr"
)

// DirStatus is how a directory's contract stands against the registry.
type DirStatus string

// The statuses of CheckDir.
const (
	DirRegistered   DirStatus = "registered"    // the registry holds it, equal
	DirNew          DirStatus = "new"           // not registered; registering it would pass
	DirDiffers      DirStatus = "differs"       // the registry holds this version with another schema
	DirDraftDiffers DirStatus = "draft-differs" // the registry holds this schema, read in another draft
	DirIncompatible DirStatus = "incompatible"  // registering it would be refused: Differences
	DirGap          DirStatus = "gap"           // registering it would leave a gap in the versions
	DirOnlyRegistry DirStatus = "only-in-registry"
)

// DirResult is one contract's standing.
type DirResult struct {
	Topic, Type string
	Version     int32
	Path        string // "" for DirOnlyRegistry
	Status      DirStatus
	Mode        compat.Mode
	Differences []compat.Difference
	// Draft is the draft the file is read in; RegistryDraft, for
	// DirDraftDiffers, the one the registry reads the version in.
	Draft, RegistryDraft string
}

// OK reports whether the result needs nothing fixed.
func (r DirResult) OK() bool {
	return r.Status == DirRegistered || r.Status == DirNew || r.Status == DirOnlyRegistry
}

// CheckDir judges a directory's contracts (ReadDir) against the registry
// without writing anything: each is registered already, or could be
// registered now in the directory's order (new versions are judged
// against the registered ones and the directory's earlier ones), or why
// not. Registered versions the directory lacks are listed too.
func (r *Registry) CheckDir(ctx context.Context, cs []DirContract) ([]DirResult, error) {
	var out []DirResult
	type subject struct{ topic, typ string }
	done := map[subject]bool{}
	for i := 0; i < len(cs); {
		j := i
		for j < len(cs) && cs[j].Topic == cs[i].Topic && cs[j].Type == cs[i].Type {
			j++
		}
		res, err := r.checkSubject(ctx, cs[i:j])
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		done[subject{cs[i].Topic, cs[i].Type}] = true
		i = j
	}
	subs, err := r.Subjects(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		if done[subject{s.Topic, s.Type}] {
			continue
		}
		for _, v := range s.Versions {
			out = append(out, DirResult{Topic: s.Topic, Type: s.Type, Version: v.Version, Status: DirOnlyRegistry, Mode: s.Mode})
		}
	}
	return out, nil
}

// checkSubject judges one type's contracts, sorted by version.
func (r *Registry) checkSubject(ctx context.Context, cs []DirContract) ([]DirResult, error) {
	sub, err := r.subject(ctx, cs[0].Topic, cs[0].Type)
	if err != nil {
		return nil, err
	}
	var prev [][]byte
	for _, v := range sub.Versions {
		b, err := r.Schema(ctx, sub.Topic, sub.Type, v.Version)
		if err != nil {
			return nil, err
		}
		prev = append(prev, readable(b))
	}
	inDir := map[int32]bool{}
	var out []DirResult
	latest := sub.Latest()
	broken := false // a version the registry could not take: later ones are judged against nothing sure
	for _, c := range cs {
		inDir[c.Version] = true
		// Read as FromDir reads it: naming its draft, DefaultDraft when
		// the file names none.
		form := WithDraft(c.Schema, DefaultDraft)
		res := DirResult{Topic: c.Topic, Type: c.Type, Version: c.Version, Path: c.Path, Mode: sub.Mode, Draft: DeclaredDraft(form)}
		switch {
		case c.Version <= int32(len(prev)) && c.Version <= latest:
			res.Status = DirRegistered
			if old := prev[c.Version-1]; !sameRead(old, form) {
				res.Status = DirDiffers
				if equalButDraft(old, form) {
					res.Status, res.RegistryDraft = DirDraftDiffers, DeclaredDraft(old)
				}
			}
		case broken || c.Version != latest+1:
			res.Status = DirGap
		default:
			var diffs []compat.Difference
			if len(prev) > 0 {
				diffs, err = compat.Check(sub.Mode, prev, form)
				if err != nil {
					return nil, usererr.New(err, "%s: cannot judge it under %s: %v", c.Path, sub.Mode, err)
				}
			}
			res.Status = DirNew
			if len(diffs) > 0 {
				res.Status, res.Differences = DirIncompatible, diffs
			}
		}
		if res.Status == DirNew {
			prev, latest = append(prev, form), c.Version
		} else if res.Status != DirRegistered {
			broken = true
		}
		out = append(out, res)
	}
	for _, v := range sub.Versions {
		if !inDir[v.Version] {
			out = append(out, DirResult{Topic: sub.Topic, Type: sub.Type, Version: v.Version, Status: DirOnlyRegistry, Mode: sub.Mode})
		}
	}
	return out, nil
}

// String says what the result means, in one line.
func (r DirResult) String() string {
	where := r.Path
	if where == "" {
		where = fmt.Sprintf("%s/%s v%d", r.Topic, r.Type, r.Version)
	}
	switch r.Status {
	case DirRegistered:
		return fmt.Sprintf("%s: registered", where)
	case DirNew:
		return fmt.Sprintf("%s: not registered yet; compatible under %s (relay contract register registers it)", where, r.Mode)
	case DirDraftDiffers:
		return fmt.Sprintf("%s: the registry reads version %d as JSON Schema %s, this file as %s: name the registry's draft in the file (\"$schema\": %q) so that producers validate as the relay does",
			where, r.Version, DraftName(r.RegistryDraft), DraftName(r.Draft), r.RegistryDraft)
	case DirDiffers:
		return fmt.Sprintf("%s: version %d is registered with a different schema; contracts are immutable: put the change in a new version", where, r.Version)
	case DirIncompatible:
		return fmt.Sprintf("%s: incompatible under %s with the registered versions (%d differences)", where, r.Mode, len(r.Differences))
	case DirGap:
		return fmt.Sprintf("%s: cannot be registered: the version before it is missing or cannot be registered", where)
	case DirOnlyRegistry:
		return fmt.Sprintf("%s: registered, but not in the directory", where)
	}
	return where
}
