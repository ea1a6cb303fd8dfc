package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/deltabus/deltabus/storage"
)

// TopicMeta is what an operator says about a topic (`relay topics
// describe`): who owns it and what it carries. Everything else a topic's
// description shows (retention, sources, contracts, personal fields) is
// read from where it lives (package topicmeta).
type TopicMeta struct {
	Topic       string    `json:"topic"`
	Owner       string    `json:"owner,omitempty"`
	Description string    `json:"description,omitempty"`
	Updated     time.Time `json:"updated"`
}

// Bounds of a TopicMeta's texts: they go into every Delta table's metaData
// and into Unity Catalog, so they stay small.
const (
	MaxOwnerLen       = 256
	MaxDescriptionLen = 4096
)

// Check reports whether the texts are within bounds and printable: valid
// UTF-8, no control characters (a description may hold newlines and tabs).
func (m TopicMeta) Check() error {
	if err := CheckName("topic", m.Topic); err != nil {
		return err
	}
	if err := checkText("owner", m.Owner, MaxOwnerLen, false); err != nil {
		return err
	}
	return checkText("description", m.Description, MaxDescriptionLen, true)
}

func checkText(what, s string, maxLen int, multiline bool) error {
	switch {
	case len(s) > maxLen:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("%s has leading or trailing spaces", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			return fmt.Errorf("%s holds the control character %U: use printable text", what, r)
		}
	}
	return nil
}

// ReadTopicMeta returns the topic's metadata, ok=false when none was set.
func ReadTopicMeta(ctx context.Context, store storage.Store, topic string) (TopicMeta, bool, error) {
	var m TopicMeta
	ok, err := readJSON(ctx, store, &m, KindTopicMeta, topic)
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("read metadata of topic %q: %w", topic, err)
	}
	if ok && m.Topic != topic {
		return TopicMeta{}, false, fmt.Errorf("metadata of topic %q in %s names topic %q: move the object away", topic, store, m.Topic)
	}
	return m, ok, nil
}

// WriteTopicMeta replaces the topic's metadata after checking it.
func WriteTopicMeta(ctx context.Context, store storage.Store, m TopicMeta) error {
	if err := m.Check(); err != nil {
		return err
	}
	if m.Updated.IsZero() {
		m.Updated = time.Now().UTC()
	}
	if err := writeJSON(ctx, store, m, KindTopicMeta, m.Topic); err != nil {
		return fmt.Errorf("write metadata of topic %q: %w", m.Topic, err)
	}
	return nil
}

// ReadRegistration reads what a relay last recorded of its registrations
// in an external catalog (package governance) into v; ok=false when none.
func ReadRegistration(ctx context.Context, store storage.Store, appID string, v any) (bool, error) {
	return readJSON(ctx, store, v, KindRegistration, appID)
}

// WriteRegistration replaces what a relay records of its registrations.
func WriteRegistration(ctx context.Context, store storage.Store, appID string, v any) error {
	return writeJSON(ctx, store, v, KindRegistration, appID)
}

// ListDescribed returns the topics that have metadata (described, maybe
// before their first event), sorted.
func ListDescribed(ctx context.Context, store storage.Store) ([]string, error) {
	probe, err := Key(KindTopicMeta, "x")
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(probe, "x.json")
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list topic metadata in %s: %w", store, err)
	}
	var out []string
	for _, o := range objs {
		if kind, names, ok := Parse(o.Key); ok && kind == KindTopicMeta {
			out = append(out, names[0])
		}
	}
	return out, nil
}
