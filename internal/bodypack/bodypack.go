// Package bodypack stores ai4s-jobq message bodies compactly: a packed body
// is one header byte, then the body without the parts of the envelope that
// the header and the message's task ID give back. A reader rebuilds the
// body byte for byte. A typical ai4s-jobq body (130 bytes: the envelope, a
// short kwargs and the 32-digit task ID) packs to its kwargs and one byte.
//
// Redis keeps a packed body (Pack, Unpack) in a field apart from a body
// stored as it is; Postgres stores every body with a header (Encode,
// Decode), Plain for one that leaves nothing out.
package bodypack

import "bytes"

// prefixes are the envelope openings a packed body may leave out:
// ai4s-jobq's schema v1 and jobq's v2, with and without a reply requested.
// A header byte names one of them (or none) and one of suffixes.
var prefixes = [...]string{
	"",
	`{"version": 1, "reply_requested": false, "kwargs": `,
	`{"version": 1, "reply_requested": true, "kwargs": `,
	`{"version": 2, "reply_requested": false, "kwargs": `,
	`{"version": 2, "reply_requested": true, "kwargs": `,
}

// suffixes are the envelope endings a packed body may leave out, each
// followed by the task ID and end; the first leaves none out.
var suffixes = [...]string{"", `, "id": "`, `, "num_retries": 0, "id": "`}

const end = `"}`

// Header is the header byte of prefix p and suffix s: 'a' + 3p + s, a
// letter, so that a packed body reads well in a database's own tools.
func Header(p, s int) byte { return byte('a' + 3*p + s) }

// Plain is the header of a body that leaves nothing out (Encode's form
// of a body that is not an envelope); Pack never writes it.
const Plain = 'a'

// FirstPacked and LastPacked bound the headers Pack writes.
var (
	FirstPacked = Header(0, 1)
	LastPacked  = Header(len(prefixes)-1, len(suffixes)-1)
)

// Pack returns body packed for a message with task ID id, and whether
// packing leaves anything out (when it does not, it returns nil, false: the
// body is to be stored as it is).
func Pack(body []byte, id string) ([]byte, bool) {
	p := 0
	for i := len(prefixes) - 1; i > 0; i-- {
		if bytes.HasPrefix(body, []byte(prefixes[i])) {
			p = i
			break
		}
	}
	rest := body[len(prefixes[p]):]
	s := 0
	for i := len(suffixes) - 1; i > 0; i-- {
		if hasEnding(rest, suffixes[i], id) {
			s = i
			break
		}
	}
	if p == 0 && s == 0 {
		return nil, false
	}
	if s > 0 {
		rest = rest[:len(rest)-len(suffixes[s])-len(id)-len(end)]
	}
	out := make([]byte, 0, 1+len(rest))
	out = append(out, Header(p, s))
	return append(out, rest...), true
}

// hasEnding reports whether b ends with suffix, id and end.
func hasEnding(b []byte, suffix, id string) bool {
	n := len(suffix) + len(id) + len(end)
	if len(b) < n {
		return false
	}
	tail := b[len(b)-n:]
	return string(tail[:len(suffix)]) == suffix && string(tail[len(suffix):len(suffix)+len(id)]) == id &&
		string(tail[len(suffix)+len(id):]) == end
}

// Unpack rebuilds the body that Pack packed as packed, for the message with
// task ID id. ok is false when packed is not a packed body (its header is
// not one Pack writes).
func Unpack[T string | []byte](packed T, id string) (body []byte, ok bool) {
	if len(packed) == 0 {
		return nil, false
	}
	h := int(packed[0]) - 'a'
	p, s := h/3, h%3
	if h < 0 || p >= len(prefixes) || (p == 0 && s == 0) {
		return nil, false
	}
	b := make([]byte, 0, len(prefixes[p])+len(packed)-1+len(suffixes[s])+len(id)+len(end))
	b = append(b, prefixes[p]...)
	b = append(b, packed[1:]...)
	if s > 0 {
		b = append(b, suffixes[s]...)
		b = append(b, id...)
		b = append(b, end...)
	}
	return b, true
}

// Encode returns body as stored with a header for a message with task ID
// id: packed when packing leaves something out, else Plain and the body.
func Encode(body []byte, id string) []byte {
	if packed, ok := Pack(body, id); ok {
		return packed
	}
	return EncodePlain(body)
}

// EncodePlain returns body stored whole, behind Plain: for a body whose
// task ID is not at hand (Encode needs it to leave the ending out).
func EncodePlain(body []byte) []byte {
	out := make([]byte, 0, 1+len(body))
	return append(append(out, Plain), body...)
}

// Decode rebuilds the body that Encode stored as stored, for the message
// with task ID id. ok is false when stored does not begin with a header
// Encode writes.
func Decode(stored []byte, id string) (body []byte, ok bool) {
	if len(stored) > 0 && stored[0] == Plain {
		return stored[1:], true
	}
	return Unpack(stored, id)
}
