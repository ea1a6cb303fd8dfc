package members

import (
	"strconv"
	"strings"
)

// ackID names one delivery of one event: the group's epoch (a reset
// starts a new one), the event's position and the delivery number. It is
// opaque to members.
type ackID struct {
	epoch int64
	pos   Position
	d     int32
}

func (a ackID) String() string {
	return strconv.FormatInt(a.epoch, 10) + "-" + strconv.FormatInt(a.pos.Version, 10) + "-" +
		strconv.FormatInt(a.pos.Offset, 10) + "-" + strconv.FormatInt(int64(a.d), 10)
}

func parseAckID(s string) (ackID, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 4 || len(s) > 80 {
		return ackID{}, badRequest("ack id %q is not one this server handed out", truncate(s))
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 || strconv.FormatInt(v, 10) != p {
			return ackID{}, badRequest("ack id %q is not one this server handed out", truncate(s))
		}
		n[i] = v
	}
	if n[3] < 1 || n[3] > 1<<31-1 {
		return ackID{}, badRequest("ack id %q is not one this server handed out", truncate(s))
	}
	return ackID{epoch: n[0], pos: Position{Version: n[1], Offset: n[2]}, d: int32(n[3])}, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
