package pii

import (
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/usererr"
)

// ErrNoKEK: an event's contract marks personal data (or its topic
// pseudonymises keys) but the process was started without DELTABUS_KEK,
// as it may be when the contract was registered after the relay started.
// The event is never written in clear: the relay waits, not ready, and
// says so.
var ErrNoKEK = errors.New("a contract marks personal data but DELTABUS_KEK is not set")

// noKEK is the error of an event that needs a key when no KEK is
// configured; what names what needs it (contractText, keyTopicText).
func noKEK(what string) error {
	return usererr.Retry(ErrNoKEK, "%s marks personal data but DELTABUS_KEK is not set, and personal data is never written in clear: the events wait; "+
		"set DELTABUS_KEK=file:///path/kek.json (`relay keys init --kek-file /path/kek.json` writes one) or DELTABUS_KEK=aws-kms://arn:..., run `relay migrate`, and restart the relay", what)
}

// contractText names an event's contract in messages.
func contractText(topic, typ string, version int32) string {
	return fmt.Sprintf("the contract of topic %q type %q version %d", topic, typ, version)
}

// keyTopicText names a topic that pseudonymises keys in messages.
func keyTopicText(topic string) string {
	return fmt.Sprintf("the policy of topic %q (pseudonymize-key)", topic)
}
