package outbox

import (
	"strings"
	"testing"
)

func TestValidTopic(t *testing.T) {
	valid := []string{"orders", "a", "0", "orders.v2", "billing-events_eu", "a.b.c", strings.Repeat("a", MaxTopicLen)}
	for _, name := range valid {
		if err := ValidTopic(name); err != nil {
			t.Errorf("ValidTopic(%q) = %v, want nil", name, err)
		}
	}
	invalid := map[string]string{
		"":                                 "empty",
		strings.Repeat("a", MaxTopicLen+1): "129 bytes long, the limit is 128",
		"_dead_letter":                     `reserved for internal tables`,
		"Orders":                           `uppercase letter 'O' at offset 0`,
		"a/b":                              `character '/' at offset 1 is not allowed`,
		"a..b":                             `contains ".." at offset 1`,
		".hidden":                          `starts with '.'`,
		"-x":                               `starts with '-'`,
		"a b":                              `character ' ' at offset 1`,
		"caf\u00e9":                        `character 'é' at offset 3`,
		"a\xffb":                           `byte 0xff at offset 1`,
		"a\\b":                             `character '\\' at offset 1`,
	}
	for name, want := range invalid {
		err := ValidTopic(name)
		if err == nil {
			t.Errorf("ValidTopic(%q) = nil, want error containing %q", name, want)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "invalid topic name ") {
			t.Errorf("ValidTopic(%q) = %q, want it to contain %q", name, err, want)
		}
	}
	if ValidTopic(DeadLetterTopic) == nil {
		t.Error("DeadLetterTopic must not be a valid producer topic")
	}
}

func TestValidTopicDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = ValidTopic("orders.created-v2") }); n != 0 {
		t.Fatalf("ValidTopic allocates %v times for a valid name", n)
	}
}
