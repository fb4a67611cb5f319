package postgres

import (
	"strconv"
	"strings"

	"github.com/jobq/jobq/driver"
)

// leaseKey is what a settlement needs to find and fence a message: its key in
// the messages_claim index (priority, id) and the claim's token. The driver's
// Lease carries it as MessageID = id and Token = "<uuid>.<priority>", so that
// a lease stays a pair of strings the portable layer can keep anywhere.
type leaseKey struct {
	id       int64
	priority int32
	token    string // the lease UUID
}

// leaseToken formats a claim's token.
func leaseToken(uuid string, priority int32) string {
	return uuid + "." + strconv.FormatInt(int64(priority), 10)
}

// parseLease reads a lease issued by this driver.
func parseLease(op string, l driver.Lease) (leaseKey, error) {
	id, err1 := strconv.ParseInt(l.MessageID, 10, 64)
	uuid, prio, ok := strings.Cut(l.Token, ".")
	p, err2 := strconv.ParseInt(prio, 10, 32)
	if err1 != nil || err2 != nil || !ok || !isUUID(uuid) {
		return leaseKey{}, driver.Errorf(driver.InvalidArgument,
			"postgres %s: lease %q/%q was not issued by a postgres queue", op, l.MessageID, l.Token)
	}
	return leaseKey{id: id, priority: int32(p), token: uuid}, nil
}

// isUUID reports whether s is a UUID in the canonical 8-4-4-4-12 form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
