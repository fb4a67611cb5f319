package postgres

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// leaseKey is what a settlement needs to find and fence a message: its key in
// the messages_claim index (priority, id) and the claim's token. The driver's
// Lease carries it as MessageID = id and Token = "<uuid>.<priority>", so that
// a lease stays a pair of strings the portable layer can keep anywhere.
type leaseKey struct {
	id       int64
	priority int32
	// token is the lease UUID, decoded: pgx sends it as a uuid (or an
	// element of a uuid[]) as it is, where a string would go through
	// several failed encode plans before one parsed it.
	token pgtype.UUID
}

// leaseToken formats a claim's token.
func leaseToken(uuid string, priority int32) string {
	return string(appendLeaseToken(nil, []byte(uuid), priority))
}

// appendLeaseToken appends leaseToken(uuid, priority) to b.
func appendLeaseToken(b, uuid []byte, priority int32) []byte {
	b = append(append(b, uuid...), '.')
	return strconv.AppendInt(b, int64(priority), 10)
}

// parseLease reads a lease issued by this driver.
func parseLease(op string, l driver.Lease) (leaseKey, error) {
	id, err1 := strconv.ParseInt(l.MessageID, 10, 64)
	uuid, prio, ok := strings.Cut(l.Token, ".")
	p, err2 := strconv.ParseInt(prio, 10, 32)
	token, isUUID := parseUUID(uuid)
	if err1 != nil || err2 != nil || !ok || !isUUID {
		return leaseKey{}, driver.Errorf(errcode.InvalidArgument,
			"postgres %s: lease %q/%q was not issued by a postgres queue", op, l.MessageID, l.Token)
	}
	return leaseKey{id: id, priority: int32(p), token: token}, nil
}

// parseUUID decodes a UUID in the canonical 8-4-4-4-12 form, either case.
func parseUUID(s string) (pgtype.UUID, bool) {
	var u pgtype.UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	hexDigits := s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u.Bytes[:], []byte(hexDigits)); err != nil {
		return u, false
	}
	u.Valid = true
	return u, true
}
