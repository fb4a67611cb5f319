package jobq

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Texts that go with a settlement (a dead letter's reason and detail) come
// from anywhere: a command's output, an error message, the bytes of a
// message that is not a task. Engines store them as text (a Postgres text
// column refuses NUL and invalid UTF-8; XML and AMQP strings refuse some
// too), and a refused settlement would leave the message to be delivered
// again on every lease expiry. So the portable layer hands drivers valid
// UTF-8 without NUL, noting any replacement in the text itself.

// maxReasonBytes and maxDetailBytes bound what a dead letter keeps.
const (
	maxReasonBytes = 4 << 10
	maxDetailBytes = 64 << 10
)

// settleText returns s as valid UTF-8 without NUL bytes, at most limit
// bytes (plus a short note), cut on a character boundary: its start is
// kept, or with keepEnd its end (an output's tail). Each NUL and each byte
// of an invalid sequence becomes U+FFFD, and a note at the end says how
// many were replaced and that the text was cut.
func settleText(s string, limit int, keepEnd bool) string {
	if len(s) <= limit && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	cut := false
	if len(s) > limit {
		if keepEnd {
			s = tailUTF8(s, limit)
		} else {
			s = cutUTF8(s, limit)
		}
		cut = true
	}
	var b strings.Builder
	b.Grow(len(s) + 64)
	replaced := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r == 0:
			b.WriteRune(utf8.RuneError)
			replaced++
			i += max(size, 1)
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	if replaced > 0 {
		b.WriteString(" [jobq: " + strconv.Itoa(replaced) + " NUL or invalid UTF-8 byte(s) replaced with U+FFFD]")
	}
	if cut {
		what := "first"
		if keepEnd {
			what = "last"
		}
		b.WriteString(" [jobq: only the " + what + " " + strconv.Itoa(limit) + " bytes kept]")
	}
	return b.String()
}

// storableID returns a task ID read from a damaged message as text any
// engine stores: unchanged when it is valid UTF-8 without NUL, otherwise
// with each NUL and each byte of an invalid sequence written as \xNN (so
// "key\xbe" keeps its 0xbe visible, where U+FFFD would hide it). A result
// record is keyed by it: under the raw bytes a text column (Postgres's)
// would refuse the record, and with it the dead letter it goes with.
func storableID(id string) string {
	if utf8.ValidString(id) && strings.IndexByte(id, 0) < 0 {
		return id
	}
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(id) + 16)
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		if (r == utf8.RuneError && size <= 1) || r == 0 {
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[id[i]>>4])
			b.WriteByte(hexDigits[id[i]&0xf])
			i++
			continue
		}
		b.WriteString(id[i : i+size])
		i += size
	}
	return b.String()
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// end inside a multi-byte character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	// Back up over continuation bytes to the start of the cut character,
	// at most utf8.UTFMax-1 of them.
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	if i > 0 && !utf8.RuneStart(s[i]) {
		return s[:n] // not UTF-8 here anyway: cut where asked
	}
	return s[:i]
}

// truncate cuts s to at most n bytes on a character boundary, marking the
// cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "..."
}

// tailUTF8 returns the longest suffix of s of at most n bytes that does not
// begin inside a multi-byte character.
func tailUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for j := 0; j < utf8.UTFMax-1 && i < len(s) && !utf8.RuneStart(s[i]); j++ {
		i++
	}
	return s[i:]
}
