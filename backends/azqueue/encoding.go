package azqueue

import (
	"encoding/base64"
	"unicode/utf8"
)

// Message text on Azure Storage Queue must be valid XML character data.
// ai4s-jobq's Python client (azure-storage-queue v12, no encode policy)
// writes the task's JSON as plain text, and other tools (Azure Functions,
// the v11 SDKs) write base64. jobq writes JSON bodies as plain text, so the
// two share a queue byte for byte, and anything else as base64; on read it
// accepts both.

// encodeText returns the message text that stores body.
func encodeText(body []byte) string {
	if isPlainText(body) {
		return string(body)
	}
	return base64.StdEncoding.EncodeToString(body)
}

// decodeText returns the body a message text stores. Text that starts with
// '{' is plain JSON; other text is base64 when it decodes as such, and is
// returned unchanged otherwise (a foreign message that is neither, which the
// portable layer then treats as poison).
func decodeText(text string) []byte {
	if len(text) > 0 && text[0] == '{' {
		return []byte(text)
	}
	if b, err := base64.StdEncoding.DecodeString(text); err == nil && len(text) > 0 {
		return b
	}
	return []byte(text)
}

// isPlainText reports whether body can be stored as it is: it starts with
// '{' (so decodeText recognises it) and holds only characters XML allows.
func isPlainText(body []byte) bool {
	if len(body) == 0 || body[0] != '{' || !utf8.Valid(body) {
		return false
	}
	for _, r := range string(body) {
		if !xmlChar(r) {
			return false
		}
	}
	return true
}

// xmlChar reports whether r is a Char in the XML 1.0 grammar.
func xmlChar(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D:
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}
