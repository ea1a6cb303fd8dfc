package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// DirContract is a contract kept as a file: <topic>/<type>/<version>.json
// (or v<version>.json) under a directory, beside an optional
// <topic>/policy.json. The type is the folder's name as is, so a type
// holding "/" cannot be kept in a directory.
type DirContract struct {
	Topic, Type string
	Version     int32
	Path        string // slash-separated, relative to the directory
	Schema      []byte
}

// ReadDir reads the contracts of a directory (os.DirFS, or an embed.FS
// compiled into a service), sorted by topic, type and version. Files that
// do not end in .json are ignored; a .json file elsewhere, a malformed
// schema or a bad name is an error naming the file.
func ReadDir(fsys fs.FS) ([]DirContract, map[string]Policy, error) {
	var out []DirContract
	policies := map[string]Policy{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		parts := strings.Split(p, "/")
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		switch {
		case len(parts) == 2 && parts[1] == "policy.json":
			var pol Policy
			if err := json.Unmarshal(b, &pol); err != nil {
				return usererr.New(err, "%s: not a topic policy (%v): want {\"onViolation\": \"hold\", \"strict\": true}", p, err)
			}
			if err := CheckPolicy(pol); err != nil {
				return usererr.New(err, "%s: %v", p, err)
			}
			policies[parts[0]] = pol
			return nil
		case len(parts) != 3:
			return usererr.New(nil, "%s: contracts are kept as <topic>/<type>/<version>.json", p)
		}
		v, err := ParseVersion(strings.TrimPrefix(strings.TrimSuffix(parts[2], ".json"), "v"))
		if err != nil {
			return usererr.New(err, "%s: the file name is not a version: contracts are kept as <topic>/<type>/<version>.json, e.g. orders/OrderPlaced/2.json", p)
		}
		c := DirContract{Topic: parts[0], Type: parts[1], Version: v, Path: p, Schema: b}
		if err := CheckSubject(c.Topic, c.Type, c.Version); err != nil {
			return usererr.New(err, "%s: %v", p, err)
		}
		if _, err := Compile(c.Topic, c.Type, c.Version, b); err != nil {
			return usererr.New(err, "%s: %v", p, err)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(out, func(a, b DirContract) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return int(a.Version) - int(b.Version)
	})
	for i := 1; i < len(out); i++ {
		if a, b := out[i-1], out[i]; a.Topic == b.Topic && a.Type == b.Type && a.Version == b.Version {
			return nil, nil, usererr.New(nil, "%s and %s are both version %d of %s/%s", a.Path, b.Path, a.Version, a.Topic, a.Type)
		}
	}
	return out, policies, nil
}

// FromDir returns a cache of the contracts of a directory (see ReadDir),
// for a producer that embeds its contracts instead of reading the store.
// It never changes: new versions come with a new build of the service.
func FromDir(fsys fs.FS, o Options) (*Cache, error) {
	cs, policies, err := ReadDir(fsys)
	if err != nil {
		return nil, err
	}
	mem := memSource{name: "contracts directory", objs: map[string][]byte{}}
	for _, dc := range cs {
		key, err := catalog.Key(catalog.KindContract, dc.Topic, dc.Type, strconv.Itoa(int(dc.Version)))
		if err != nil {
			return nil, usererr.New(err, "%s: %v", dc.Path, err)
		}
		// Stored as Register stores it, naming the draft it was read in.
		mem.objs[key] = WithDraft(dc.Schema, DefaultDraft)
	}
	for t, p := range policies {
		key, err := catalog.Key(catalog.KindContractPolicy, t)
		if err != nil {
			return nil, usererr.New(err, "%s/policy.json: %v", t, err)
		}
		mem.objs[key], _ = json.Marshal(p)
	}
	c := &Cache{src: mem, o: o.withDefaults(), schemas: map[string]*Schema{}, relisted: map[subjectKey]time.Time{}, static: true}
	if err := c.Load(context.Background()); err != nil {
		return nil, err
	}
	return c, nil
}

// memSource is a directory's contracts under their catalog keys.
type memSource struct {
	name string
	objs map[string][]byte
}

func (m memSource) String() string { return m.name }

func (m memSource) List(_ context.Context, prefix, startAfter string) ([]storage.Object, error) {
	var out []storage.Object
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, storage.Object{Key: k, Size: int64(len(b))})
		}
	}
	slices.SortFunc(out, func(a, b storage.Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m memSource) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path.Base(key), storage.ErrNotFound)
	}
	return b, nil
}
