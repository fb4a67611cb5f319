package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jobq/jobq"
)

// parseTaskLine turns one line of push's standard input into a task: a line
// starting with '{' is a JSON object of kwargs, anything else a shell
// command. env (the -e flags) is merged into the task's env, winning over
// it, as ai4s-jobq does.
func parseTaskLine(line string, env []jobq.EnvVar) (*jobq.Task, error) {
	if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "{") {
		return &jobq.Task{Command: line, Env: env}, nil
	}
	obj, err := decodeObject([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON task: %w (a line starting with '{' must be a JSON object such as {\"cmd\": \"echo hi\"})", err)
	}
	shell := true
	for _, m := range obj {
		switch m.key {
		case "cmd", "env", "cwd":
		case "bg_dirsync_to":
			if string(m.val) != "null" {
				shell = false
			}
		default:
			shell = false
		}
	}
	cmdVal, hasCmd := obj.get("cmd")
	if hasCmd && shell {
		t := &jobq.Task{}
		if err := json.Unmarshal(cmdVal, &t.Command); err != nil || t.Command == "" {
			return nil, fmt.Errorf(`"cmd" must be a non-empty string, got %s`, cmdVal)
		}
		if v, ok := obj.get("cwd"); ok && string(v) != "null" {
			if err := json.Unmarshal(v, &t.Cwd); err != nil {
				return nil, fmt.Errorf(`"cwd" must be a string, got %s`, v)
			}
		}
		if v, ok := obj.get("env"); ok && string(v) != "null" {
			vars, err := decodeObject(v)
			if err != nil {
				return nil, fmt.Errorf(`"env" must be an object of strings: %w`, err)
			}
			for _, m := range vars {
				var s string
				if err := json.Unmarshal(m.val, &s); err != nil {
					return nil, fmt.Errorf(`"env" value of %s must be a string, got %s`, m.key, m.val)
				}
				t.Env = append(t.Env, jobq.EnvVar{Name: m.key, Value: s})
			}
		}
		for _, e := range env {
			t.Env = setEnv(t.Env, e.Name, e.Value)
		}
		return t, nil
	}
	if hasCmd {
		var s string
		if json.Unmarshal(cmdVal, &s) != nil {
			return nil, fmt.Errorf(`"cmd" must be a string, got %s`, cmdVal)
		}
	}
	// Not a plain shell task: keep the kwargs as the payload for a Go
	// handler, with -e merged into its env.
	if len(env) > 0 {
		envObj := orderedObject{}
		if v, ok := obj.get("env"); ok && string(v) != "null" {
			if envObj, err = decodeObject(v); err != nil {
				return nil, fmt.Errorf(`"env" must be an object: %w`, err)
			}
		}
		for _, e := range env {
			b, _ := json.Marshal(e.Value)
			envObj = envObj.set(e.Name, b)
		}
		obj = obj.set("env", envObj.encode())
	}
	return &jobq.Task{Payload: obj.encode()}, nil
}

// orderedObject is a JSON object that keeps its key order.
type orderedObject []member

type member struct {
	key string
	val json.RawMessage
}

func (o orderedObject) get(k string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == k {
			return m.val, true
		}
	}
	return nil, false
}

func (o orderedObject) set(k string, v json.RawMessage) orderedObject {
	for i := range o {
		if o[i].key == k {
			o[i].val = v
			return o
		}
	}
	return append(o, member{k, v})
}

func (o orderedObject) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// decodeObject decodes a JSON object, keeping key order.
func decodeObject(data []byte) (orderedObject, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var obj orderedObject
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		obj = obj.set(key, val)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("unexpected data after the object")
	}
	return obj, nil
}
