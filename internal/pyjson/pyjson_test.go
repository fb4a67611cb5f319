package pyjson

import (
	"strings"
	"testing"
)

// The Python-compatibility vectors live in the root package's wire tests
// (testdata/wire/vectors.json); these cover the parser's own rules.

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"python style kept", `{"a": [1, 2.5, "x"], "b": null}`, `{"a": [1, 2.5, "x"], "b": null}`},
		{"compact reformatted", `{"a":1,"b":{"c":[]}}`, `{"a": 1, "b": {"c": []}}`},
		{"duplicate keys: first position, last value", `{"a": 1, "b": 2, "a": 3}`, `{"a": 3, "b": 2}`},
		{"lone surrogates kept", `"\ud800x\udfff"`, `"\ud800x\udfff"`},
		{"surrogate pair joined", `"\uD83D\uDE00"`, `"\ud83d\ude00"`},
		{"high surrogate then other escape", `"\ud800\u0041"`, `"\ud800A"`},
		{"raw non-ascii escaped", `"é😀"`, `"\u00e9\ud83d\ude00"`},
		{"solidus unescaped", `"\/"`, `"/"`},
		{"DEL escaped", "\"\x7f\"", `"\u007f"`},
		{"objects and arrays nested in each other", `{"a": [{"b": 1, "c": [2, {"d": 3}]}, 4], "e": {"f": [], "g": [[], {}]}}`, `{"a": [{"b": 1, "c": [2, {"d": 3}]}, 4], "e": {"f": [], "g": [[], {}]}}`},
		{"python literals", `[NaN, Infinity, -Infinity, true, false]`, `[NaN, Infinity, -Infinity, true, false]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(AppendValue(nil, v)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, msg string }{
		{``, "end of input"},
		{`{"a" 1}`, "expecting ':'"},
		{`{a: 1}`, "object key in double quotes"},
		{`[1,]`, "expecting a value"},
		{`01`, "after the end"},
		{`1.`, "after the end"},
		{`-`, "invalid number"},
		{`"\x"`, "invalid escape"},
		{`"\u12"`, "4 hex digits"},
		{`"abc`, "unterminated string"},
		{"\"\t\"", "control character"},
		{"\"\xff\"", "not valid UTF-8"},
		{`nul`, "expecting a value"},
		{strings.Repeat("[", 1002), "nested deeper"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%q) error = %v, want one saying %q", tc.in, err, tc.msg)
		}
	}
}

func TestValidText(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"ok é": true, "\xed\xa0\x80": true, "\xff": false, "\xc3": false} {
		if got := ValidText(s); got != want {
			t.Errorf("ValidText(%q) = %v, want %v", s, got, want)
		}
	}
}
