// Package envmask hides, for display, the values of task environment
// variables whose names look like credentials (API_TOKEN, DB_PASSWORD,
// AZURE_STORAGE_KEY, ...). The commands and the dashboard that show a task
// use it; what a worker runs is never masked.
package envmask

import (
	"strings"
	"unicode"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/pyjson"
)

// Masked replaces a secret value.
const Masked = "****"

// secretWords make a name secret when one of its components (the parts
// between '_', '-', '.' and lower-to-upper case changes) is one of them,
// ignoring case.
var secretWords = map[string]bool{
	"token": true, "tokens": true, "secret": true, "secrets": true,
	"password": true, "passwords": true, "passwd": true, "pwd": true, "pass": true, "passphrase": true,
	"key": true, "keys": true, "apikey": true, "accesskey": true, "accountkey": true, "privatekey": true,
	"secretkey": true, "sharedaccesskey": true,
	"credential": true, "credentials": true, "creds": true,
	"auth": true, "authorization": true, "bearer": true,
	"sas": true, "sig": true, "signature": true, "connectionstring": true, "connstr": true,
}

// secretPairs are two adjacent components that make a name secret together.
var secretPairs = map[[2]string]bool{{"connection", "string"}: true, {"conn", "str"}: true, {"access", "key"}: true}

// secretEndings make a component secret when it ends in one of them
// (PGPASSWORD, HFTOKEN, CLIENTSECRET); short words such as "key" do not,
// or MONKEY would be a secret.
var secretEndings = []string{"password", "passwd", "secret", "token"}

// Secret reports whether a variable named name likely holds a credential:
// a component of the name, case-insensitive, is TOKEN, SECRET, PASSWORD,
// PASSWD, PWD, PASS, KEY, APIKEY, CREDENTIAL(S), AUTH, SAS, SIG, SIGNATURE
// or the like, or two are CONNECTION STRING; or a component ends in
// PASSWORD, PASSWD, SECRET or TOKEN.
func Secret(name string) bool {
	parts := components(name)
	for i, p := range parts {
		if secretWords[p] {
			return true
		}
		for _, e := range secretEndings {
			if strings.HasSuffix(p, e) {
				return true
			}
		}
		if i > 0 && secretPairs[[2]string{parts[i-1], p}] {
			return true
		}
	}
	return false
}

// components splits a name at characters other than letters and digits
// and where a lower-case letter is followed by an upper-case one, in lower
// case: "AZURE_StorageKey" is azure, storage, key.
func components(name string) []string {
	var parts []string
	start := -1
	var prev rune
	for i, r := range name {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			if start >= 0 {
				parts = append(parts, strings.ToLower(name[start:i]))
				start = -1
			}
		case start < 0:
			start = i
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			parts = append(parts, strings.ToLower(name[start:i]))
			start = i
		}
		prev = r
	}
	if start >= 0 {
		parts = append(parts, strings.ToLower(name[start:]))
	}
	return parts
}

// Env returns env with the values of secret variables replaced by Masked;
// env itself is left as it is.
func Env(env []jobq.EnvVar) []jobq.EnvVar {
	out := env
	copied := false
	for i, e := range env {
		if e.Value == "" || !Secret(e.Name) {
			continue
		}
		if !copied {
			out, copied = append([]jobq.EnvVar(nil), env...), true
		}
		out[i].Value = Masked
	}
	return out
}

// Kwargs returns a task's kwargs JSON object with the secret values of its
// "env" object masked. Anything else (not JSON, no env, nothing secret) is
// returned as it is.
func Kwargs(kwargs []byte) []byte {
	v, err := pyjson.Parse(kwargs)
	if err != nil {
		return kwargs
	}
	if masked, ok := maskKwargs(v); ok {
		return pyjson.AppendValue(nil, masked)
	}
	return kwargs
}

// Body returns a message body (the task on the wire, whose "kwargs" member
// is the kwargs object or a string holding it) with the secret values of
// the task's environment masked. Anything else is returned as it is.
func Body(body []byte) []byte {
	v, err := pyjson.Parse(body)
	if err != nil || v.Kind != pyjson.Object {
		return body
	}
	changed := false
	vals := append([]pyjson.Value(nil), v.Vals...)
	for i, k := range v.Keys {
		if k != "kwargs" {
			continue
		}
		switch kw := vals[i]; kw.Kind {
		case pyjson.Object:
			if m, ok := maskKwargs(kw); ok {
				vals[i], changed = m, true
			}
		case pyjson.String:
			inner, err := pyjson.ParseString(kw.Str)
			if err != nil {
				continue
			}
			if m, ok := maskKwargs(inner); ok {
				vals[i], changed = pyjson.Value{Kind: pyjson.String, Str: string(pyjson.AppendValue(nil, m))}, true
			}
		}
	}
	if !changed {
		return body
	}
	v.Vals = vals
	return pyjson.AppendValue(nil, v)
}

// maskKwargs masks the secret members of kwargs' "env" object, and says
// whether it masked any.
func maskKwargs(kwargs pyjson.Value) (pyjson.Value, bool) {
	if kwargs.Kind != pyjson.Object {
		return kwargs, false
	}
	changed := false
	vals := append([]pyjson.Value(nil), kwargs.Vals...)
	for i, k := range kwargs.Keys {
		if k != "env" || vals[i].Kind != pyjson.Object {
			continue
		}
		env := vals[i]
		envVals := append([]pyjson.Value(nil), env.Vals...)
		for j, name := range env.Keys {
			if Secret(name) && !(envVals[j].Kind == pyjson.String && envVals[j].Str == "") {
				envVals[j] = pyjson.Value{Kind: pyjson.String, Str: Masked}
				changed = true
			}
		}
		env.Vals = envVals
		vals[i] = env
	}
	kwargs.Vals = vals
	return kwargs, changed
}
