package redis

import (
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
)

// The claim script sends each message it leased as one string:
//
//	MEMBERLEN DELIVERIES ENQUEUED IDLEN TRACELEN KIND MEMBER ID TRACE BODY
//
// six space-separated header fields (ENQUEUED, Unix milliseconds, empty
// when the hash has none; KIND b for a plain body, z for a packed one),
// then the ready member (the 16-digit lease token, then the message id),
// the task ID, the trace context (and group, after a newline) and the body
// end to end, unescaped: the lengths say where each ends. One string a
// message, where there were eight, saved the client 12 of a task's 54
// allocations end to end (BenchmarkEndToEnd): go-redis allocates each
// reply's string and its interface value.

// claimed is one message of a claim's reply.
type claimed struct {
	member, id, trace, group, body string
	deliveries                     int
	enqueued                       int64
	packed                         bool
}

// tokenLen is the length of the lease token at the head of a ready member
// (its arrival number, zero-padded).
const tokenLen = 16

// parseClaimed reads one message of a claim's reply; ok is false when s
// is not one.
func parseClaimed(s string) (c claimed, ok bool) {
	var f [6]string
	for i := range f {
		if f[i], s, ok = strings.Cut(s, " "); !ok {
			return claimed{}, false
		}
	}
	ml, err1 := strconv.Atoi(f[0])
	dc, err2 := strconv.Atoi(f[1])
	il, err3 := strconv.Atoi(f[3])
	tl, err4 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || ml < 0 || il < 0 || tl < 0 || ml > len(s)-il-tl || (f[5] != "b" && f[5] != "z") {
		return claimed{}, false
	}
	if f[2] != "" {
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return claimed{}, false
		}
		c.enqueued = n
	}
	c.deliveries, c.packed = dc, f[5] == "z"
	c.member, c.id = s[:ml], s[ml:ml+il]
	c.trace, c.group = splitTrace(s[ml+il : ml+il+tl])
	c.body = s[ml+il+tl:]
	return c, true
}

// received is the message as the driver returns it, its lease ending at
// expiry.
func (c *claimed) received(expiry time.Time) *driver.Received {
	token, mid := c.member, ""
	if len(c.member) > tokenLen {
		token, mid = c.member[:tokenLen], c.member[tokenLen:]
	}
	var body []byte
	if c.packed {
		body = storedBody("", c.body, c.id)
	} else {
		body = []byte(c.body)
	}
	return &driver.Received{
		ID:            c.id,
		Body:          body,
		DeliveryCount: c.deliveries,
		EnqueuedAt:    fromMs(c.enqueued),
		TraceParent:   c.trace,
		Group:         c.group,
		Lease:         driver.Lease{MessageID: mid, Token: token, Expiry: expiry},
	}
}
