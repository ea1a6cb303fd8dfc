package classify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Classifier tells, for an event's (topic, type, schema_version), which
// parts of its payload are personal and where its subject is. It is safe
// for concurrent use and cheap per call (the relay asks once per event).
// Static is one; the contract registry (contract.Cache) is the other.
type Classifier interface {
	// Classify returns the classification of one contract: nil when its
	// schema marks no personal data, ErrUnknownVersion (wrapped) when the
	// type has classified versions but not this one: the event cannot be
	// told apart from personal data and must not be written in clear. Any
	// other error means the classification could not be read (a registry
	// that cannot be listed): the event waits.
	Classify(ctx context.Context, topic, typ string, version int32) (*Classification, error)
	// PseudonymizeKey reports whether the topic's key column identifies
	// people, so the relay stores a keyed hash of it instead.
	PseudonymizeKey(topic string) bool
}

// ErrUnknownVersion: a type with personal data in some versions has an
// event of a version without a schema.
var ErrUnknownVersion = errors.New("no schema for this version of a type whose other versions mark personal data")

type contractKey struct {
	topic, typ string
	version    int32
}

// Static is a Classifier over a fixed set of classifications.
type Static struct {
	byContract map[contractKey]*Classification
	piiTypes   map[[2]string]bool // (topic, type) with personal data in some version
	keyTopics  map[string]bool
}

// NewStatic returns an empty Static; Add fills it.
func NewStatic() *Static {
	return &Static{byContract: map[contractKey]*Classification{}, piiTypes: map[[2]string]bool{}, keyTopics: map[string]bool{}}
}

// Add records the classification of (topic, type, version); nil c means
// the schema marks nothing.
func (s *Static) Add(topic, typ string, version int32, c *Classification) {
	s.byContract[contractKey{topic, typ, version}] = c
	if c.HasPersonal() {
		s.piiTypes[[2]string{topic, typ}] = true
	}
}

// SetPseudonymizeKey marks a topic whose key column identifies people.
func (s *Static) SetPseudonymizeKey(topic string) { s.keyTopics[topic] = true }

// Classify implements Classifier.
func (s *Static) Classify(_ context.Context, topic, typ string, version int32) (*Classification, error) {
	if c, ok := s.byContract[contractKey{topic, typ, version}]; ok {
		return c, nil
	}
	if s.piiTypes[[2]string{topic, typ}] {
		return nil, fmt.Errorf("topic %q type %q version %d: %w", topic, typ, version, ErrUnknownVersion)
	}
	return nil, nil
}

// PseudonymizeKey implements Classifier.
func (s *Static) PseudonymizeKey(topic string) bool { return s.keyTopics[topic] }

// KeyTopics lists the topics that pseudonymise their keys, sorted.
func (s *Static) KeyTopics() []string {
	out := make([]string, 0, len(s.keyTopics))
	for t := range s.keyTopics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Any reports whether any contract marks personal data or any topic
// pseudonymises its key: the relay then needs the key table and KEK.
func (s *Static) Any() bool { return len(s.piiTypes) > 0 || len(s.keyTopics) > 0 }

// TopicSettings is DIR/<topic>/topic.json.
type TopicSettings struct {
	// PseudonymizeKey stores a keyed hash of the key column instead of the key.
	PseudonymizeKey bool `json:"pseudonymize_key"`
}

// ReadDir reads the schemas of a directory laid out as
// DIR/<topic>/<type>/<version>.json (version a positive integer), with an
// optional DIR/<topic>/topic.json holding TopicSettings. Every schema is
// parsed (Parse); the first bad one is an error naming its file.
func ReadDir(dir string) (*Static, error) {
	s := NewStatic()
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("schema directory %s is not readable: %v", dir, errOr(err, "not a directory"))
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case len(parts) == 2 && parts[1] == "topic.json":
			return s.readTopic(path, parts[0])
		case len(parts) == 3 && strings.HasSuffix(parts[2], ".json"):
			v, err := strconv.ParseInt(strings.TrimSuffix(parts[2], ".json"), 10, 32)
			if err != nil || v < 1 {
				return fmt.Errorf("schema file %s: the file name must be the version, a positive integer (%s/%s/1.json)", path, parts[0], parts[1])
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			c, err := Parse(b)
			if err != nil {
				return fmt.Errorf("schema file %s: %w", path, err)
			}
			s.Add(parts[0], parts[1], int32(v), c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Static) readTopic(path, topic string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var ts TopicSettings
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		return fmt.Errorf("topic settings %s: %w (expected {\"pseudonymize_key\": true})", path, err)
	}
	if ts.PseudonymizeKey {
		s.SetPseudonymizeKey(topic)
	}
	return nil
}

func errOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

// Contract is one classified (topic, type, version).
type Contract struct {
	Topic, Type string
	Version     int32
	*Classification
}

// Contracts lists the classifications that name a subject, sorted.
func (s *Static) Contracts() []Contract {
	var out []Contract
	for k, c := range s.byContract {
		if c != nil && c.SubjectPointer != "" {
			out = append(out, Contract{Topic: k.topic, Type: k.typ, Version: k.version, Classification: c})
		}
	}
	slices.SortFunc(out, func(a, b Contract) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.Type, b.Type), cmp.Compare(a.Version, b.Version))
	})
	return out
}
