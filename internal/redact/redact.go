// Package redact removes credentials from URLs, connection strings and
// messages before they reach logs, errors or output.
package redact

import (
	"net/url"
	"strings"
)

// redactedValue replaces every secret.
const redactedValue = "xxxxx"

// secretNames are parameter names whose value is a credential, in lower
// case or capitalised ("key", "Key"): query parameters, connection-string
// parts, SAS tokens. Written in capitals they are left alone: "KEY=VALUE"
// is how help text writes a placeholder.
var secretNames = []string{"pwd", "pass", "key", "sig", "signature", "sas", "auth"}

// secretSuffixes make any name ending in them a credential (password,
// AccountKey, SharedAccessKey, client_secret, HF_TOKEN, ...), ignoring case.
var secretSuffixes = []string{
	"password", "passwd", "secret", "token", "accountkey", "sharedaccesskey", "sharedaccesssignature",
	"apikey", "api_key", "access_key", "private_key", "connection_string", "connectionstring",
	"conn_str", "credential", "credentials",
}

func isSecretName(name string) bool {
	for _, n := range secretNames {
		if name == n || (len(name) == len(n) && name[0] == n[0]-'a'+'A' && name[1:] == n[1:]) {
			return true
		}
	}
	for _, suf := range secretSuffixes {
		if len(name) >= len(suf) && strings.EqualFold(name[len(name)-len(suf):], suf) {
			return true
		}
	}
	return false
}

// String returns s with every credential it recognises replaced by
// "xxxxx":
//
//   - the password of anything shaped like a URL's user-info: in a run of
//     text without white space or '/', what lies between the first ':' and
//     the last '@' ("postgres://u:PW@h", and typos such as
//     "postgres//u:PW@h" or "redis:/:PW@h", and text that only looks like
//     a URL);
//   - the value of NAME=VALUE (or NAME%3DVALUE) where NAME is a credential
//     (password, pwd, key, sig, AccountKey, SharedAccessKey,
//     SharedAccessSignature, or any name ending in password, secret, token,
//     ...), in queries, connection strings and NAME=VALUE text; the value
//     ends at &, ;, white space, a quote or a comma. The placeholder
//     "..." (as in a hint, "AccountKey=...") is left as it is.
//
// It works on any text, so it applies to whole error messages; jobq's CLI
// passes every error, usage message and log line it prints through it.
func String(s string) string {
	// A pass can replace what ended a span (a quote inside a password), so
	// that the next pass finds a longer one: passes repeat until one
	// changes nothing. A pass only ever replaces text with redactedValue,
	// so more passes can only hide more.
	for range maxPasses {
		if !strings.ContainsAny(s, "@=%") {
			return s
		}
		r := redactValues(redactUserinfo(s))
		if r == s {
			return s
		}
		s = r
	}
	return s
}

// maxPasses bounds String's passes; text that real errors and URLs hold
// needs one, and two when a password holds a quote.
const maxPasses = 4

// isBreak ends a user-info run.
func isBreak(c byte) bool { return c == '/' || isSpace(c) }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func redactUserinfo(s string) string {
	if strings.IndexByte(s, '@') < 0 {
		return s
	}
	return redactRuns(redactAuthorities(s))
}

// redactAuthorities handles a password typed with a raw '/' (which does not
// parse): after "//", what lies between the first ':' and the last '@'
// before white space or a quote.
func redactAuthorities(s string) string {
	var b strings.Builder
	done := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '/' || s[i+1] != '/' {
			continue
		}
		a := i + 2
		e := a
		for e < len(s) && !isSpace(s[e]) && s[e] != '"' && s[e] != '\'' && s[e] != '`' {
			e++
		}
		auth := s[a:e]
		c := strings.IndexByte(auth, ':')
		l := strings.LastIndexByte(auth, '@')
		if c >= 0 && l > c+1 && strings.IndexByte(auth[:c], '/') < 0 {
			b.WriteString(s[done : a+c+1])
			b.WriteString(redactedValue)
			done = a + l
		}
		i = e
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// redactRuns redacts ":PASSWORD@" in runs of text without white space or
// '/'.
func redactRuns(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && !isBreak(s[j]) {
			j++
		}
		run := s[i:j]
		if c := strings.IndexByte(run, ':'); c >= 0 {
			if a := strings.LastIndexByte(run, '@'); a > c+1 {
				b.WriteString(s[done : i+c+1])
				b.WriteString(redactedValue)
				done = i + a
			}
		}
		i = j + 1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// isNameChar may appear in a parameter name.
func isNameChar(c byte) bool {
	return c == '_' || c == '.' || c == '-' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// endsValue ends a parameter's value.
func endsValue(c byte) bool {
	switch c {
	case '&', ';', '"', '\'', ',', ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// isEncodedBreak reports whether hex, the two digits after a '%', encode
// a character that separates parameters ('&', '?' or ';'): a URL that
// carries another URL's query (results=https%3A...%3Fsv%3D...%26sig%3D...)
// separates its parameters so.
func isEncodedBreak(hex string) bool {
	switch strings.ToUpper(hex) {
	case "26", "3F", "3B":
		return true
	}
	return false
}

// separatorAt is the length of the name-value separator at s[i]: 1 for
// '=', 3 for an encoded one ("%3D"), 0 for none.
func separatorAt(s string, i int) int {
	switch {
	case s[i] == '=':
		return 1
	case s[i] == '%' && i+2 < len(s) && s[i+1] == '3' && (s[i+2] == 'D' || s[i+2] == 'd'):
		return 3
	}
	return 0
}

// nameStart is where the name that ends at s[i] starts, no earlier than
// done.
func nameStart(s string, done, i int) int {
	n := i
	for n > done && isNameChar(s[n-1]) {
		n--
	}
	if n > done && s[n-1] == '%' && n+2 < i && isEncodedBreak(s[n:n+2]) {
		n += 2 // "%26sig%3D...": the name follows an encoded '&'
	}
	return n
}

// valueEnd is where the value that starts at s[v] ends: at a character
// that ends values, or, for a value whose separator was encoded (a
// parameter of a URL carried inside another, "%26sig%3D..."), also at an
// encoded parameter break. A plain value may hold an encoded '?' or '&'
// (a password "?000" is "password=%3F000") and runs on past it.
func valueEnd(s string, v int, encoded bool) int {
	e := v
	for e < len(s) && !endsValue(s[e]) && !(encoded && s[e] == '%' && e+2 < len(s) && isEncodedBreak(s[e+1:e+3])) {
		e++
	}
	return e
}

func redactValues(s string) string {
	var b strings.Builder
	done := 0
	for i := 0; i < len(s); i++ {
		sep := separatorAt(s, i)
		if sep == 0 {
			continue
		}
		n := nameStart(s, done, i)
		v := i + sep
		e := valueEnd(s, v, sep > 1)
		if n == i || e == v || s[v:e] == "..." || !isSecretName(s[n:i]) {
			// No name, no value, a placeholder ("AccountKey=..."), or
			// not a secret.
			continue
		}
		b.WriteString(s[done:v])
		b.WriteString(redactedValue)
		done = e
		i = e - 1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// URL returns s with credentials replaced by "xxxxx": the password of
// the user-info part and the values of query parameters that carry secrets
// (password, key, sig, SharedAccessKey, ...). Use it for every URL that
// reaches a log or an error. Strings that do not parse as URLs are
// redacted as text (see Redact).
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return String(s)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedValue)
		}
	}
	// The query is left as it was typed (re-encoding it would reorder it),
	// but for the values of credentials; the rest is redacted as text
	// below, and so are typos that do not parse as a user-info part.
	u.RawQuery = redactQuery(u.RawQuery)
	return String(u.String())
}

// redactQuery replaces the value of each parameter of the raw query q
// whose name, decoded, is a credential ("password", "pass%77ord"): as
// text, a value would end at a space, comma or quote, which a query value
// may hold.
func redactQuery(q string) string {
	if !strings.Contains(q, "=") {
		return q
	}
	params := strings.Split(q, "&")
	for i, p := range params {
		name, value, _ := strings.Cut(p, "=")
		if value == "" || value == "..." {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil && isSecretName(n) {
			params[i] = name + "=" + redactedValue
		}
	}
	return strings.Join(params, "&")
}
