package redis

import "bytes"

// A pushed body is stored in one of two fields of the message hash:
//
//   - b holds the body as it is. Releases before packed bodies read only
//     this field.
//   - z holds a packed body: one header byte, then the body without the
//     parts of ai4s-jobq's envelope that the header and the message's task
//     ID (field i) give back. A reader rebuilds the body byte for byte.
//
// A message has one of the two (should it have both, b is the newer: see
// scripts.go). Packing is what keeps a message hash a listpack, Redis's
// compact encoding for small hashes: a hash whose values are all at most
// hash-max-listpack-value (64 bytes by default) long costs about a quarter
// of a hash table holding the same fields, and a typical ai4s-jobq body
// (130 bytes: the envelope, a short kwargs and the 32-digit task ID) packs
// to its kwargs, well under 64 bytes.
//
// A release that knows only b would find no body in a packed message and
// dead-letter it as corrupt; layoutScript makes such releases fail on the
// queue before they claim anything.

// packedPrefixes are the envelope openings a packed body may leave out:
// ai4s-jobq's schema v1 and jobq's v2, with and without a reply requested.
// A header byte names one of them (or none) and one of packedSuffixes.
var packedPrefixes = [...]string{
	"",
	`{"version": 1, "reply_requested": false, "kwargs": `,
	`{"version": 1, "reply_requested": true, "kwargs": `,
	`{"version": 2, "reply_requested": false, "kwargs": `,
	`{"version": 2, "reply_requested": true, "kwargs": `,
}

// packedSuffixes are the envelope endings a packed body may leave out,
// each followed by the task ID and packedEnd; the first leaves none out.
var packedSuffixes = [...]string{"", `, "id": "`, `, "num_retries": 0, "id": "`}

const packedEnd = `"}`

// packedHeader is the header byte of prefix p and suffix s: 'a' + 3p + s,
// a letter, so that a packed body reads well in redis-cli.
func packedHeader(p, s int) byte { return byte('a' + 3*p + s) }

// packedHeaderPattern is a Lua pattern matching the start of a packed
// body: one of the header bytes packedHeader writes (the claim script
// quarantines a field z that does not match).
var packedHeaderPattern = "^[" + string(packedHeader(0, 1)) + "-" +
	string(packedHeader(len(packedPrefixes)-1, len(packedSuffixes)-1)) + "]"

// packBody returns body packed for a message with task ID id, and whether
// packing leaves anything out (when it does not, the body is stored as it
// is, in field b).
func packBody(body []byte, id string) ([]byte, bool) {
	p := 0
	for i := len(packedPrefixes) - 1; i > 0; i-- {
		if bytes.HasPrefix(body, []byte(packedPrefixes[i])) {
			p = i
			break
		}
	}
	rest := body[len(packedPrefixes[p]):]
	s := 0
	for i := len(packedSuffixes) - 1; i > 0; i-- {
		if hasEnding(rest, packedSuffixes[i], id) {
			s = i
			break
		}
	}
	if p == 0 && s == 0 {
		return nil, false
	}
	if s > 0 {
		rest = rest[:len(rest)-len(packedSuffixes[s])-len(id)-len(packedEnd)]
	}
	out := make([]byte, 0, 1+len(rest))
	out = append(out, packedHeader(p, s))
	return append(out, rest...), true
}

// hasEnding reports whether b ends with suffix, id and packedEnd.
func hasEnding(b []byte, suffix, id string) bool {
	n := len(suffix) + len(id) + len(packedEnd)
	if len(b) < n {
		return false
	}
	tail := b[len(b)-n:]
	return string(tail[:len(suffix)]) == suffix && string(tail[len(suffix):len(suffix)+len(id)]) == id &&
		string(tail[len(suffix)+len(id):]) == packedEnd
}

// unpackBody rebuilds the body that packBody packed as packed, for the
// message with task ID id. ok is false when packed is not a packed body
// (its header is not one packBody writes: the claim
// script quarantines such a message, so only another tool can cause it).
func unpackBody(packed, id string) (body []byte, ok bool) {
	if packed == "" {
		return nil, false
	}
	h := int(packed[0]) - 'a'
	p, s := h/3, h%3
	if h < 0 || p >= len(packedPrefixes) || (p == 0 && s == 0) {
		return nil, false
	}
	b := make([]byte, 0, len(packedPrefixes[p])+len(packed)-1+len(packedSuffixes[s])+len(id)+len(packedEnd))
	b = append(b, packedPrefixes[p]...)
	b = append(b, packed[1:]...)
	if s > 0 {
		b = append(b, packedSuffixes[s]...)
		b = append(b, id...)
		b = append(b, packedEnd...)
	}
	return b, true
}

// storedBody is the body of a message whose fields b and z a script
// returned, for the message with task ID id. A z that does not unpack
// (written by another tool; the claim quarantines such a message) is
// returned as it is, for peek and the dead letters to show.
func storedBody(b, z any, id string) []byte {
	if packed := asStr(z); packed != "" {
		if body, ok := unpackBody(packed, id); ok {
			return body
		}
		return []byte(packed)
	}
	return []byte(asStr(b))
}
