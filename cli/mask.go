package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/envmask"
	"github.com/jobq/jobq/internal/redact"
)

// showSecretsFlag adds --show-secrets, the one name every command that
// prints a task's environment or command uses for it.
func showSecretsFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "show-secrets", false, "print the values of task environment variables whose names look secret (API_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, ...), by default "+envmask.Masked+
		", and the credentials in commands, reasons and output tails (postgres://u:PASSWORD@db), by default xxxxx")
}

// shownText is text a human-readable output prints of a task (its
// command, a reason, an output tail): with credentials redacted unless
// show.
func shownText(s string, show bool) string {
	if show {
		return s
	}
	return redact.String(s)
}

// taskText is what a table shows of a task: its command, or its payload
// (see displayPayload), with credentials redacted unless show.
// A stashed task's message holds only the reference: peek does not fetch
// the stash, so the table names where the task is.
func taskText(t *jobq.Task, show bool) string {
	switch {
	case t.Command != "":
		return oneRow(shownText(t.Command, show))
	case t.Stash != nil:
		return fmt.Sprintf("(stashed, %s: %s)", humanBytes(t.Stash.Size), shownText(t.Stash.URL, show))
	}
	return oneRow(shownText(string(displayPayload(t.Payload, show)), show))
}

// oneRow is s as one table cell: without the newline a line read from
// standard input keeps, and with other line breaks, tabs and control
// characters escaped, so that columns stay aligned.
func oneRow(s string) string {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// displayPayload is a task's payload (its kwargs object) with secret
// environment values masked unless show.
func displayPayload(p json.RawMessage, show bool) json.RawMessage {
	if show {
		return p
	}
	return envmask.Kwargs(p)
}

// displayBody is a message body as --json prints it: the stored JSON with
// secret environment values masked unless show, or a JSON string of the
// bytes when they are not JSON.
func displayBody(body []byte, show bool) json.RawMessage {
	if !json.Valid(body) {
		b, _ := json.Marshal(string(body))
		return b
	}
	if !show {
		body = envmask.Body(body)
	}
	return body
}

// envObject is a task's environment as JSON prints it: an object, in the
// task's order.
type envObject []jobq.EnvVar

// MarshalJSON writes the variables as one object, in order.
func (e envObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, v := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(v.Name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
