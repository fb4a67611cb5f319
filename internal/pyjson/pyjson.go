// Package pyjson reads JSON the way Python's json.loads does and writes it
// the way Python's json.dumps does with its default settings, so that bytes
// written by Go and by Python agree exactly (jobq's task IDs are MD5 hashes
// of such bytes, computed the same way by ai4s-jobq).
//
// Python's defaults are: separators ", " and ": ", ensure_ascii (every
// character outside printable ASCII, DEL included, escaped as \uXXXX in
// lower-case hex, astral characters as surrogate pairs), object keys kept in
// insertion order, duplicate keys collapsed to the first position with the
// last value, integers written as they are, floats written as repr() writes
// them, and NaN/Infinity/-Infinity accepted and written as literals.
//
// Python strings may hold lone surrogates (json.loads("\"\\ud800\"") works);
// Parse keeps them as WTF-8 (the 3-byte encoding of the surrogate code
// point) so that AppendString writes them back as the same escape.
package pyjson

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the type of a Value.
type Kind uint8

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is a parsed JSON value that keeps what encoding/json loses: object
// key order, duplicate keys and number literals.
type Value struct {
	Kind Kind
	// Str is a String's text, or a Number's literal as written.
	Str string
	// Bool is a Bool's value.
	Bool bool
	// Keys are an Object's member names and Vals its member values, in
	// document order, duplicates included; use Get and Members for
	// Python's view of them. Vals are also an Array's elements.
	Keys []string
	Vals []Value
}

// Get returns the value of an object member, the last one when the key is
// repeated (as Python's dict does).
func (v Value) Get(key string) (Value, bool) {
	for i := len(v.Keys) - 1; i >= 0; i-- {
		if v.Keys[i] == key {
			return v.Vals[i], true
		}
	}
	return Value{}, false
}

// Members returns an object's members as Python's dict holds them: each key
// once, at its first position, with its last value.
func (v Value) Members() ([]string, []Value) {
	if !hasDuplicates(v.Keys) {
		return v.Keys, v.Vals
	}
	keys := make([]string, 0, len(v.Keys))
	vals := make([]Value, 0, len(v.Keys))
	at := make(map[string]int, len(v.Keys))
	for i, k := range v.Keys {
		if j, seen := at[k]; seen {
			vals[j] = v.Vals[i]
			continue
		}
		at[k] = len(keys)
		keys = append(keys, k)
		vals = append(vals, v.Vals[i])
	}
	return keys, vals
}

func hasDuplicates(keys []string) bool {
	if len(keys) < 2 {
		return false
	}
	if len(keys) <= 8 {
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[i] == keys[j] {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			return true
		}
		seen[k] = struct{}{}
	}
	return false
}

// maxDepth bounds nesting, as Python's recursion limit does, so that hostile
// input cannot exhaust the stack.
const maxDepth = 1000

// SyntaxError says where and why a document is not JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at offset %d", e.Msg, e.Offset)
}

// Parse reads one JSON document (surrounding whitespace allowed). It accepts
// what Python's json.loads accepts from UTF-8 input, NaN and Infinity
// included, and rejects control characters inside strings.
func Parse(data []byte) (Value, error) {
	// One copy of the input; every unescaped string and number literal of
	// the result is then a substring of it, with no copy of its own.
	return ParseString(string(data))
}

// ParseString is Parse for a document held in a string. The strings of the
// result may share the input's memory.
func ParseString(data string) (Value, error) {
	// Python decodes bytes with utf-8-sig and surrogatepass: a BOM is
	// skipped and WTF-8 surrogates are accepted.
	data = strings.TrimPrefix(data, "\ufeff")
	if !validWTF8(data) {
		return Value{}, &SyntaxError{Offset: invalidAt(data), Msg: "input is not valid UTF-8"}
	}
	p := parsers.Get().(*parser)
	defer p.release()
	p.data, p.pos = data, 0
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, p.errorf("unexpected %s after the end of the JSON value", p.describe())
	}
	return v, nil
}

// parser reads one document. keys and vals are a stack shared by the
// objects and arrays being read: each collects its members on top of it
// and takes an exact-size copy when it ends, so that a document costs one
// allocation per container instead of a slice growing member by member.
// Parsers are pooled, so the stack is reused across documents.
type parser struct {
	data string
	pos  int
	keys []string
	vals []Value
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// release returns p to the pool without references into the last document
// (members cleared what it popped; an error leaves entries on the stack).
// A stack grown by a huge document is not kept.
func (p *parser) release() {
	clear(p.keys)
	clear(p.vals)
	p.data, p.keys, p.vals = "", p.keys[:0], p.vals[:0]
	if cap(p.keys) > 1024 || cap(p.vals) > 1024 {
		p.keys, p.vals = nil, nil
	}
	parsers.Put(p)
}

// members copies the stack's entries above keyBase and valBase (the stack
// heights when v began) into v and pops them, clearing what it popped.
// Arrays push no keys.
func (p *parser) members(v *Value, keyBase, valBase int) {
	if len(p.keys) > keyBase {
		v.Keys = slices.Clone(p.keys[keyBase:])
		clear(p.keys[keyBase:])
		p.keys = p.keys[:keyBase]
	}
	v.Vals = slices.Clone(p.vals[valBase:])
	clear(p.vals[valBase:])
	p.vals = p.vals[:valBase]
}

func (p *parser) errorf(format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	return fmt.Sprintf("character %q", p.data[p.pos])
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) literal(word string) bool {
	if strings.HasPrefix(p.data[p.pos:], word) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, p.errorf("JSON nested deeper than %d levels", maxDepth)
	}
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input, expecting a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		return Value{Kind: String, Str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.literal("null"):
		return Value{Kind: Null}, nil
	case p.literal("true"):
		return Value{Kind: Bool, Bool: true}, nil
	case p.literal("false"):
		return Value{Kind: Bool}, nil
	case p.literal("NaN"):
		return Value{Kind: Number, Str: "NaN"}, nil
	case p.literal("Infinity"):
		return Value{Kind: Number, Str: "Infinity"}, nil
	default:
		return Value{}, p.errorf("unexpected %s, expecting a value", p.describe())
	}
}

func (p *parser) object(depth int) (Value, error) {
	p.pos++ // {
	v := Value{Kind: Object}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	keyBase, valBase := len(p.keys), len(p.vals)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("unexpected %s, expecting an object key in double quotes", p.describe())
		}
		k, err := p.string()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("unexpected %s, expecting ':' after an object key", p.describe())
		}
		p.pos++
		p.skipSpace()
		m, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.keys = append(p.keys, k)
		p.vals = append(p.vals, m)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input inside an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.members(&v, keyBase, valBase)
			return v, nil
		default:
			return Value{}, p.errorf("unexpected %s, expecting ',' or '}' in an object", p.describe())
		}
	}
}

func (p *parser) array(depth int) (Value, error) {
	p.pos++ // [
	v := Value{Kind: Array}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	keyBase, valBase := len(p.keys), len(p.vals)
	for {
		p.skipSpace()
		item, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.vals = append(p.vals, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input inside an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.members(&v, keyBase, valBase)
			return v, nil
		default:
			return Value{}, p.errorf("unexpected %s, expecting ',' or ']' in an array", p.describe())
		}
	}
}

// number reads a JSON number (Python's grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?)
// or -Infinity, keeping the literal.
func (p *parser) number() (Value, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
		if p.literal("Infinity") {
			return Value{Kind: Number, Str: "-Infinity"}, nil
		}
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return Value{}, p.errorf("invalid number: expecting a digit, found %s", p.describe())
	}
	// Python stops the number where its grammar stops ("1." parses as 1
	// followed by garbage), which the caller then reports.
	if p.pos+1 < len(p.data) && p.data[p.pos] == '.' && isDigit(p.data[p.pos+1]) {
		p.pos++
		digits()
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		save := p.pos
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			p.pos = save
		}
	}
	return Value{Kind: Number, Str: p.data[start:p.pos]}, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// string reads a JSON string, returning its text. Lone surrogate escapes
// become WTF-8.
func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			p.pos++
			return p.data[start : p.pos-1], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	return p.escapedString(start)
}

// escapedString reads the rest of a string whose body begins at
// data[start] and has an escape or a control character at p.pos.
func (p *parser) escapedString(start int) (string, error) {
	// A Builder's String does not copy: one allocation for the text, sized
	// by the escaped form, which is never shorter than the text.
	var buf strings.Builder
	buf.Grow(escapedLen(p.data, start))
	buf.WriteString(p.data[start:p.pos])
	for {
		if p.pos >= len(p.data) {
			return "", &SyntaxError{Offset: start - 1, Msg: "unterminated string"}
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return buf.String(), nil
		case c < 0x20:
			return "", p.errorf("invalid control character %q in a string; it must be escaped", c)
		case c != '\\':
			buf.WriteByte(c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(p.data) {
			return "", &SyntaxError{Offset: start - 1, Msg: "unterminated string"}
		}
		if err := p.escape(&buf); err != nil {
			return "", err
		}
	}
}

// escape writes the text of the escape whose letter is at p.pos (just
// after its backslash) and moves past it.
func (p *parser) escape(buf *strings.Builder) error {
	e := p.data[p.pos]
	p.pos++
	if e == 'u' {
		return p.unicodeEscape(buf)
	}
	c, ok := unescape(e)
	if !ok {
		return p.errorf("invalid escape \\%c in a string", e)
	}
	buf.WriteByte(c)
	return nil
}

// unescape returns the byte that the one-letter escape \e stands for.
func unescape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// unicodeEscape writes the text of a \u escape whose hex digits are at
// p.pos, joining a high surrogate with a following low one. A lone
// surrogate becomes WTF-8.
func (p *parser) unicodeEscape(buf *strings.Builder) error {
	r, ok := p.hex4()
	if !ok {
		return p.errorf("invalid \\u escape: expecting 4 hex digits")
	}
	if utf16.IsSurrogate(r) && r < 0xdc00 && p.pos+6 <= len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
		save := p.pos
		p.pos += 2
		if lo, ok := p.hex4(); ok && lo >= 0xdc00 && lo <= 0xdfff {
			buf.WriteRune(utf16.DecodeRune(r, lo))
			return nil
		}
		p.pos = save
	}
	writeWTF8(buf, r)
	return nil
}

// escapedLen returns the length of the string body starting at data[start]
// up to its closing quote (or the end of data when it has none).
func escapedLen(data string, start int) int {
	for i := start; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i - start
		}
	}
	return len(data) - start
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(p.data[p.pos:p.pos+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(n), true
}

// writeWTF8 writes r, encoding a surrogate code point as its 3 bytes
// (which WriteRune would replace with U+FFFD).
func writeWTF8(buf *strings.Builder, r rune) {
	if utf16.IsSurrogate(r) {
		buf.Write([]byte{0xe0 | byte(r>>12), 0x80 | byte(r>>6)&0x3f, 0x80 | byte(r)&0x3f})
		return
	}
	buf.WriteRune(r)
}

// surrogateAt reports the surrogate code point WTF-8-encoded at s[i:], if any.
func surrogateAt[T string | []byte](s T, i int) (rune, bool) {
	if i+2 < len(s) && s[i] == 0xed && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2] >= 0x80 && s[i+2] <= 0xbf {
		return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), true
	}
	return 0, false
}

func validWTF8[T string | []byte](s T) bool { return invalidAt(s) < 0 }

// invalidAt returns the offset of the first byte that is neither UTF-8 nor a
// WTF-8 surrogate, or -1.
func invalidAt[T string | []byte](s T) int {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		if _, ok := surrogateAt(s, i); ok {
			i += 3
			continue
		}
		var r rune
		var n int
		switch v := any(s).(type) {
		case string:
			r, n = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, n = utf8.DecodeRune(v[i:])
		}
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// ValidText reports whether s can be written as a JSON string: UTF-8, with
// lone surrogates in WTF-8 allowed (Parse produces those).
func ValidText(s string) bool { return validWTF8(s) }

const hexDigits = "0123456789abcdef"

// AppendString appends s as Python's json.dumps writes a str with
// ensure_ascii: quoted, with \" \\ \n \r \t \b \f, and \uXXXX (lower-case
// hex) for every other character outside ' '..'~'. Bytes that are not
// UTF-8 are written as \ufffd; check with ValidText first.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			if c < utf8.RuneSelf {
				dst = appendU(dst, rune(c))
				i++
				start = i
				continue
			}
			if r, ok := surrogateAt(s, i); ok {
				dst = appendU(dst, r)
				i += 3
				start = i
				continue
			}
			r, n := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				dst = appendU(appendU(dst, hi), lo)
			} else {
				dst = appendU(dst, r) // includes U+FFFD for invalid bytes
			}
			i += n
			start = i
			continue
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// AppendNumber appends a JSON number literal as Python writes the value
// json.loads made of it: an integer unchanged (-0 becomes 0), a float (any
// literal with '.', 'e' or 'E') as repr(float) writes it, and NaN, Infinity
// and -Infinity as they are. Floats beyond float64's range are Infinity,
// as in Python.
func AppendNumber(dst []byte, lit string) []byte {
	switch lit {
	case "NaN", "Infinity", "-Infinity":
		return append(dst, lit...)
	}
	if !strings.ContainsAny(lit, ".eE") {
		if strings.Trim(lit, "-0") == "" {
			return append(dst, '0')
		}
		return append(dst, lit...)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrSyntax {
		return append(dst, lit...) // not a number at all: keep what was given
	}
	return AppendFloat(dst, f)
}

// AppendFloat appends f as Python's repr(float) does: the shortest digits
// that round-trip, in fixed notation with at least one decimal when the
// decimal exponent is in -4 < exp <= 16 and in exponent notation (e+XX,
// two digits at least) otherwise.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case f != f:
		return append(dst, "NaN"...)
	case f > 1.7976931348623157e308:
		return append(dst, "Infinity"...)
	case f < -1.7976931348623157e308:
		return append(dst, "-Infinity"...)
	case f == 0:
		if 1/f < 0 {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// FormatFloat 'e' gives d.ddde±XX with the shortest round-trip digits.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			dst = append(dst, "0."...)
			dst = append(dst, strings.Repeat("0", -decpt)...)
			return append(dst, digits...)
		case decpt >= len(digits):
			dst = append(dst, digits...)
			dst = append(dst, strings.Repeat("0", decpt-len(digits))...)
			return append(dst, ".0"...)
		default:
			dst = append(dst, digits[:decpt]...)
			dst = append(dst, '.')
			return append(dst, digits[decpt:]...)
		}
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	if exp < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}

// AppendValue appends v as Python's json.dumps writes what json.loads made
// of it: ", " and ": " separators, ensure_ascii strings, Python numbers,
// duplicate object keys collapsed as a dict collapses them.
func AppendValue(dst []byte, v Value) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Bool:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case Number:
		return AppendNumber(dst, v.Str)
	case String:
		return AppendString(dst, v.Str)
	case Array:
		dst = append(dst, '[')
		for i, item := range v.Vals {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = AppendValue(dst, item)
		}
		return append(dst, ']')
	default:
		keys, vals := v.Members()
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = AppendString(dst, k)
			dst = append(dst, ": "...)
			dst = AppendValue(dst, vals[i])
		}
		return append(dst, '}')
	}
}
