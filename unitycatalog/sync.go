package unitycatalog

import (
	"context"
	"fmt"
	"sort"
	"strconv"
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
	Skipped        map[string]string `json:"skipped"`   // topic -> why (no table yet, or no event yet in its group's)
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

// registration is one table Sync wants registered: a topic's own, or a
// group's (of is "topic x" or "group g", for reports).
type registration struct {
	of   string
	want CreateTable
}

// wanted lists the registrations of l, in topic order: each topic with
// its own table, and each group's table once; topics without a table (or,
// in a group, without an event yet) are skipped, with why.
func wanted(t Target, l topicmeta.Listing) ([]registration, map[string]string) {
	skipped := map[string]string{}
	var out []registration
	for _, in := range l.Topics {
		if in.Shared() {
			if in.Version < 0 {
				skipped[in.Topic] = fmt.Sprintf("topic %q: %s", in.Topic, cmpOr(in.Problem, "no event yet"))
			}
			continue
		}
		want, err := TableFor(in, t.Catalog, t.Schema, t.Version)
		if err != nil {
			skipped[in.Topic] = err.Error()
			continue
		}
		out = append(out, registration{"topic " + strconv.Quote(in.Topic), want})
	}
	for _, g := range l.Groups {
		if g.Version < 0 {
			continue // its topics, if any, are skipped above
		}
		want, err := GroupTableFor(g, l.Topics, t.Catalog, t.Schema, t.Version)
		if err != nil {
			skipped["group "+g.Group] = err.Error()
			continue
		}
		out = append(out, registration{"group " + strconv.Quote(g.Group), want})
	}
	return out, skipped
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Sync registers every topic of l that has a table in t's schema, each
// topic group's table once for all its topics, creating the catalog and
// schema if missing (see the package doc).
func (c *Client) Sync(ctx context.Context, t Target, l topicmeta.Listing) (Report, error) {
	rep := Report{Replaced: map[string]string{}, Drifted: map[string]string{}, Conflicts: map[string]string{}}
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
	regs, skipped := wanted(t, l)
	rep.Skipped = skipped
	claimed := map[string]string{} // UC name -> what claimed it
	for _, r := range regs {
		want := r.want
		key := strings.ToLower(want.Name)
		if other, ok := claimed[key]; ok {
			rep.Conflicts[want.Name] = fmt.Sprintf("%s and %s both map to it", other, r.of)
			continue
		}
		claimed[key] = r.of
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
			rep.Conflicts[want.Name] = fmt.Sprintf("a table of that name exists at %s, not at the %s's %s: drop or rename it", got.StorageLocation, r.of, want.StorageLocation)
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
// else. created=false with a nil error and a conflict: the name is taken
// by a table at another location.
func (c *Client) Register(ctx context.Context, t Target, in topicmeta.Info) (created bool, conflict string, err error) {
	want, err := TableFor(in, t.Catalog, t.Schema, t.Version)
	if err != nil {
		return false, "", err
	}
	return c.register(ctx, want, "topic")
}

// RegisterGroup is Register for a topic group's table, registered once
// for all its topics (topics: their Infos, for the properties). A group
// table registered before some of its topics joined is left as it is:
// `relay catalog sync` brings its list of topics up to date.
func (c *Client) RegisterGroup(ctx context.Context, t Target, g topicmeta.GroupInfo, topics []topicmeta.Info) (created bool, conflict string, err error) {
	want, err := GroupTableFor(g, topics, t.Catalog, t.Schema, t.Version)
	if err != nil {
		return false, "", err
	}
	return c.register(ctx, want, "group")
}

func (c *Client) register(ctx context.Context, want CreateTable, what string) (created bool, conflict string, err error) {
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
		return false, fmt.Sprintf("%s exists at %s, not at the %s's %s", want.FullName(), got.StorageLocation, what, want.StorageLocation), nil
	}
	return false, "", nil
}

func sameLocation(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
