// TEMPORARY STUB written by the lead so the package compiles while the wire
// format is being written. The helper who owns wire.go replaces this whole
// file with the real, ai4s-jobq-compatible implementation.

package jobq

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
)

type stubWire struct {
	Version    int    `json:"version"`
	Kwargs     string `json:"kwargs"`
	NumRetries int    `json:"num_retries"`
	ID         string `json:"id"`
}

// MarshalTask encodes t (stub).
func MarshalTask(t *Task) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	kw, _ := json.Marshal(map[string]any{"cmd": t.Command, "payload": t.Payload})
	w := stubWire{Version: 1, Kwargs: string(kw), NumRetries: t.NumRetries}
	b, _ := json.Marshal(w)
	if t.ID == "" {
		s := md5.Sum(b)
		t.ID = hex.EncodeToString(s[:])
	}
	w.ID = t.ID
	return json.Marshal(w)
}

// UnmarshalTask decodes a message body (stub).
func UnmarshalTask(body []byte) (*Task, error) {
	var w stubWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, &Error{Code: InvalidArgument, Op: "decode", Msg: err.Error(), Err: err}
	}
	var kw struct {
		Cmd     string          `json:"cmd"`
		Payload json.RawMessage `json:"payload"`
	}
	_ = json.Unmarshal([]byte(w.Kwargs), &kw)
	return &Task{ID: w.ID, Command: kw.Cmd, NumRetries: w.NumRetries, Version: w.Version}, nil
}
