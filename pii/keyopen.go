package pii

import (
	"context"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/usererr"
)

// ErrNoKEK: an event's contract marks personal data (or its topic
// pseudonymises keys) but the process was started without DELTABUS_KEK,
// as it may be when the contract was registered after the relay started.
// The event is never written in clear: the relay waits, not ready, and
// says so.
var ErrNoKEK = errors.New("a contract marks personal data but DELTABUS_KEK is not set")

// keyStore returns the key table, or ErrNoKEK naming what needs it (why).
func (p *Protector) keyStore(_ context.Context, why func() string) (*keys.Store, error) {
	if p.keys != nil {
		return p.keys, nil
	}
	return nil, usererr.Retry(ErrNoKEK, "%s marks personal data but DELTABUS_KEK is not set, and personal data is never written in clear: the events wait; "+
		"set DELTABUS_KEK=file:///path/kek.json (`relay keys init --kek-file /path/kek.json` writes one) or DELTABUS_KEK=aws-kms://arn:..., run `relay migrate`, and restart the relay", why())
}

// contractText names an event's contract in messages.
func contractText(topic, typ string, version int32) func() string {
	return func() string { return fmt.Sprintf("the contract of topic %q type %q version %d", topic, typ, version) }
}

// keyTopicText names a topic that pseudonymises keys in messages.
func keyTopicText(topic string) func() string {
	return func() string { return fmt.Sprintf("the policy of topic %q (pseudonymize-key)", topic) }
}
