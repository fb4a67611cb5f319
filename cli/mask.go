package cli

import (
	"bytes"
	"encoding/json"

	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/envmask"
)

// showSecretsFlag adds --show-secrets, the one name every command that
// prints a task's environment uses for it.
func showSecretsFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "show-secrets", false, "print the values of task environment variables whose names look secret (API_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, ...); by default they print as "+envmask.Masked)
}

// taskText is what a table shows of a task: its command, or its payload
// (see displayPayload).
func taskText(t *jobq.Task, show bool) string {
	if t.Command != "" {
		return t.Command
	}
	return string(displayPayload(t.Payload, show))
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
