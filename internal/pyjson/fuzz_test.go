package pyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// depth is the deepest nesting of arrays and objects in data, counting
// brackets outside strings.
func depth(data []byte) int {
	d, most, inStr, esc := 0, 0, false, false
	for _, c := range data {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			d++
			most = max(most, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return most
}

// FuzzParse compares Parse and AppendValue with encoding/json where the two
// should agree: every document encoding/json accepts (UTF-8, not nested past
// Python's limit) Parse accepts too; what AppendValue writes is valid JSON
// (unless it holds NaN or Infinity, which only Python accepts) that
// encoding/json reads as the same value as the input; and writing is
// stable: Parse(AppendValue(v)) writes the same bytes again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2.5, "x"], "b": null}`, `{"a":1,"b":{"c":[]}}`, `{"a": 1, "b": 2, "a": 3}`,
		`"\ud800x\udfff"`, `"\uD83D\uDE00"`, `"é😀\u2028"`, `"\/"`, "\"\x7f\"", `[NaN, Infinity, -Infinity, true, false]`,
		`[1e5, -0, 0.1, 1e16, 1e-7, 12345678901234567890123, 1e400, -0.0, 5e-324]`, " \ufeff{} ", `{"cmd": "echo hi\n"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			if utf8.Valid(data) && json.Valid(data) && depth(data) < maxDepth && !bytes.HasPrefix(data, []byte("\ufeff")) {
				t.Fatalf("Parse rejects %q, which encoding/json accepts: %v", data, err)
			}
			return
		}
		out := AppendValue(nil, v)
		v2, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse cannot read what AppendValue wrote: %q: %v", out, err)
		}
		if again := AppendValue(nil, v2); !bytes.Equal(again, out) {
			t.Fatalf("writing is not stable:\n%s\n%s", out, again)
		}
		if strings.Contains(string(out), "NaN") || strings.Contains(string(out), "Infinity") {
			return // Python's extension; encoding/json has no such values
		}
		if !json.Valid(out) {
			t.Fatalf("AppendValue wrote invalid JSON: %q (from %q)", out, data)
		}
		var a, b any
		errA := json.Unmarshal(bytes.TrimPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("\ufeff")), &a)
		if errB := json.Unmarshal(out, &b); errB != nil {
			var te *json.UnmarshalTypeError
			if errors.As(errB, &te) && strings.HasPrefix(te.Value, "number") {
				return // an integer beyond float64, which Python reads exactly
			}
			t.Fatalf("encoding/json cannot read %q: %v", out, errB)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("encoding/json reads the input and Python's form differently:\n%q → %#v\n%q → %#v", data, a, out, b)
		}
	})
}
