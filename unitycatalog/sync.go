package unitycatalog

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/deltabus/deltabus/topicmeta"
)

// Target is where topics are registered.
type Target struct {
	Catalog, Schema string
	Version         string // DeltaBus's release (PropVersion)
	// Replace brings a drifted table up to date by deleting and creating
	// it again; false reports it as Drifted.
	Replace bool
}

// Report is what a Sync did, table by table (Unity Catalog names).
type Report struct {
	CatalogCreated bool              `json:"catalogCreated"`
	SchemaCreated  bool              `json:"schemaCreated"`
	Created        []string          `json:"created"`
	Replaced       map[string]string `json:"replaced"` // table -> what differed
	Drifted        map[string]string `json:"drifted"`  // table -> what differs (Replace off)
	Unchanged      []string          `json:"unchanged"`
	Skipped        map[string]string `json:"skipped"`   // topic -> why (no table yet)
	Conflicts      map[string]string `json:"conflicts"` // table -> why it is not ours
}

// Changed reports whether the Sync wrote anything.
func (r Report) Changed() bool {
	return r.CatalogCreated || r.SchemaCreated || len(r.Created)+len(r.Replaced) > 0
}

// EnsureSchema creates the catalog and the schema when missing.
func (c *Client) EnsureSchema(ctx context.Context, t Target) (catalogCreated, schemaCreated bool, err error) {
	if err := CheckName("catalog", t.Catalog); err != nil {
		return false, false, err
	}
	if err := CheckName("schema", t.Schema); err != nil {
		return false, false, err
	}
	_, err = c.GetCatalog(ctx, t.Catalog)
	if IsNotFound(err) {
		_, err = c.CreateCatalog(ctx, CatalogInfo{Name: t.Catalog, Comment: "DeltaBus topics"})
		catalogCreated = err == nil
		if IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return false, false, err
	}
	_, err = c.GetSchema(ctx, t.Catalog, t.Schema)
	if IsNotFound(err) {
		_, err = c.CreateSchema(ctx, SchemaInfo{Name: t.Schema, CatalogName: t.Catalog, Comment: "DeltaBus topic tables, registered by relay"})
		schemaCreated = err == nil
		if IsAlreadyExists(err) {
			err = nil
		}
	}
	return catalogCreated, schemaCreated, err
}

// Sync registers every topic of infos that has a table in t's schema,
// creating the catalog and schema if missing (see the package doc).
func (c *Client) Sync(ctx context.Context, t Target, infos []topicmeta.Info) (Report, error) {
	rep := Report{Replaced: map[string]string{}, Drifted: map[string]string{}, Skipped: map[string]string{}, Conflicts: map[string]string{}}
	var err error
	if rep.CatalogCreated, rep.SchemaCreated, err = c.EnsureSchema(ctx, t); err != nil {
		return rep, err
	}
	existing, err := c.ListTables(ctx, t.Catalog, t.Schema)
	if err != nil {
		return rep, err
	}
	byName := make(map[string]TableInfo, len(existing))
	for _, e := range existing {
		byName[strings.ToLower(e.Name)] = e
	}
	claimed := map[string]string{} // UC name -> topic
	for _, in := range infos {
		want, err := TableFor(in, t.Catalog, t.Schema, t.Version)
		if err != nil {
			rep.Skipped[in.Topic] = err.Error()
			continue
		}
		key := strings.ToLower(want.Name)
		if other, ok := claimed[key]; ok {
			rep.Conflicts[want.Name] = fmt.Sprintf("topics %q and %q both map to it", other, in.Topic)
			continue
		}
		claimed[key] = in.Topic
		got, exists := byName[key]
		if !exists {
			if err := c.create(ctx, want); err != nil {
				if IsAlreadyExists(err) { // created meanwhile (a relay registering it)
					if got, err = c.GetTable(ctx, want.FullName()); err == nil {
						exists = true
					}
				}
				if !exists {
					return rep, err
				}
			} else {
				rep.Created = append(rep.Created, want.Name)
				continue
			}
		}
		if !sameLocation(got.StorageLocation, want.StorageLocation) {
			rep.Conflicts[want.Name] = fmt.Sprintf("a table of that name exists at %s, not at the topic's %s: drop or rename it", got.StorageLocation, want.StorageLocation)
			continue
		}
		diff := Diff(got, want)
		switch {
		case diff == "":
			rep.Unchanged = append(rep.Unchanged, want.Name)
		case !t.Replace:
			rep.Drifted[want.Name] = diff
		default:
			if err := c.DeleteTable(ctx, want.FullName()); err != nil && !IsNotFound(err) {
				return rep, err
			}
			if err := c.create(ctx, want); err != nil {
				return rep, fmt.Errorf("re-create %s after deleting it to update it (%s): %w; run `relay catalog sync` again", want.FullName(), diff, err)
			}
			rep.Replaced[want.Name] = diff
		}
	}
	sort.Strings(rep.Created)
	sort.Strings(rep.Unchanged)
	return rep, nil
}

func (c *Client) create(ctx context.Context, want CreateTable) error {
	_, err := c.CreateTable(ctx, want)
	return err
}

// Register registers one topic's table (the relay's own registration of
// new topics): it creates the table when missing and changes nothing
// else. ok=false with a nil error: the name is taken by a table at
// another location (a conflict, reported by conflict).
func (c *Client) Register(ctx context.Context, t Target, in topicmeta.Info) (created bool, conflict string, err error) {
	want, err := TableFor(in, t.Catalog, t.Schema, t.Version)
	if err != nil {
		return false, "", err
	}
	err = c.create(ctx, want)
	if err == nil {
		return true, "", nil
	}
	if !IsAlreadyExists(err) {
		return false, "", err
	}
	got, err := c.GetTable(ctx, want.FullName())
	if err != nil {
		return false, "", err
	}
	if !sameLocation(got.StorageLocation, want.StorageLocation) {
		return false, fmt.Sprintf("%s exists at %s, not at the topic's %s", want.FullName(), got.StorageLocation, want.StorageLocation), nil
	}
	return false, "", nil
}

func sameLocation(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
