package redis

import "github.com/jobq/jobq/internal/bodypack"

// A pushed body is stored in one of two fields of the message hash:
//
//   - b holds the body as it is. Releases before packed bodies read only
//     this field.
//   - z holds a packed body (internal/bodypack): one header byte, then the
//     body without the parts of ai4s-jobq's envelope that the header and
//     the message's task ID (field i) give back. A reader rebuilds the body
//     byte for byte.
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

// packedHeaderPattern is a Lua pattern matching the start of a packed
// body: one of the header bytes bodypack.Pack writes (the claim script
// quarantines a field z that does not match).
var packedHeaderPattern = "^[" + string(bodypack.FirstPacked) + "-" + string(bodypack.LastPacked) + "]"

// storedBody is the body of a message whose fields b and z a script
// returned, for the message with task ID id. A z that does not unpack
// (written by another tool; the claim quarantines such a message) is
// returned as it is, for peek and the dead letters to show.
func storedBody(b, z any, id string) []byte {
	if packed := asStr(z); packed != "" {
		if body, ok := bodypack.Unpack(packed, id); ok {
			return body
		}
		return []byte(packed)
	}
	return []byte(asStr(b))
}
