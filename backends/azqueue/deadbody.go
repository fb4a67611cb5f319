package azqueue

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// A dead letter is an ordinary message in the queue "<name>-failed", as in
// ai4s-jobq. ai4s-jobq stores the task's JSON there unchanged (its "error"
// field never reaches the wire), so a dead letter must stay a task its tools
// can read. jobq therefore keeps the original JSON object and appends two
// keys: "error" (the reason, the field name ai4s-jobq's Task uses) and
// "jobq_dead_letter" with the details. JSON readers ignore unknown keys, and
// RequeueDead cuts the appended keys off again, so the task goes back byte
// for byte as it was. A body that is not a JSON object (a poison message) is
// wrapped instead and kept in base64.

// deadKey is the key of jobq's dead-letter record inside a dead letter.
const deadKey = "jobq_dead_letter"

// deadInfo is jobq's record of why and when a message was dead-lettered.
type deadInfo struct {
	Reason        string    `json:"reason"`
	Detail        string    `json:"detail,omitempty"`
	DeadAt        time.Time `json:"dead_at"`
	DeliveryCount int       `json:"delivery_count,omitempty"`
	// MessageID is the message's ID in the main queue when it died.
	MessageID string `json:"message_id,omitempty"`
	// OriginalLength is the length of the original JSON object: the dead
	// letter's first OriginalLength-1 bytes followed by "}" restore it.
	OriginalLength int `json:"original_length,omitempty"`
	// Body is the original body when it was not a JSON object.
	Body []byte `json:"body,omitempty"`
}

// deadBody builds the dead letter for body. It shortens the detail (keeping
// its tail, where a failing command's last words are) and then the reason
// until the encoded text fits in limit bytes; when even a bare record does
// not fit it returns the original body and false, so the task is kept even
// though the reason is lost.
func deadBody(body []byte, info deadInfo, limit int) ([]byte, bool) {
	reasonCut := false
	for {
		out := buildDead(body, info)
		if limit <= 0 || len(encodeText(out)) <= limit {
			return out, true
		}
		over := len(encodeText(out)) - limit
		switch {
		case info.Detail != "":
			cut := min(len(info.Detail), over+16)
			info.Detail = trimUTF8Front(info.Detail[cut:])
			if info.Detail != "" {
				info.Detail = "..." + info.Detail
			}
		case !reasonCut && len(info.Reason) > 64:
			reasonCut = true
			info.Reason = strings.ToValidUTF8(info.Reason[:max(64, len(info.Reason)-over-16)], "") + "..."
		default:
			return body, false
		}
	}
}

func buildDead(body []byte, info deadInfo) []byte {
	reason, _ := json.Marshal(info.Reason)
	obj := bytes.TrimSpace(body)
	var out bytes.Buffer
	if isJSONObject(obj) {
		info.OriginalLength = len(obj)
		rec, _ := json.Marshal(info)
		inner := obj[:len(obj)-1]
		out.Write(inner)
		if len(bytes.TrimSpace(inner[1:])) > 0 {
			out.WriteString(", ")
		}
		out.WriteString(`"error": `)
		out.Write(reason)
		out.WriteString(`, "` + deadKey + `": `)
		out.Write(rec)
		out.WriteString("}")
		return out.Bytes()
	}
	info.Body = append([]byte{}, body...)
	rec, _ := json.Marshal(info)
	out.WriteString(`{"error": `)
	out.Write(reason)
	out.WriteString(`, "` + deadKey + `": `)
	out.Write(rec)
	out.WriteString("}")
	return out.Bytes()
}

// parseDead splits a dead letter into the original body and jobq's record.
// A dead letter written by ai4s-jobq has no record: the body is the task and
// the reason is whatever its "error" key says (usually nothing).
func parseDead(text []byte) ([]byte, deadInfo) {
	var rec struct {
		Error string    `json:"error"`
		Dead  *deadInfo `json:"jobq_dead_letter"`
	}
	if err := json.Unmarshal(text, &rec); err != nil || rec.Dead == nil {
		return text, deadInfo{Reason: rec.Error}
	}
	info := *rec.Dead
	switch {
	case info.Body != nil:
		body := info.Body
		info.Body = nil
		return body, info
	case info.OriginalLength > 1 && info.OriginalLength <= len(text):
		orig := append(append([]byte{}, text[:info.OriginalLength-1]...), '}')
		if json.Valid(orig) {
			return orig, info
		}
	}
	return text, info
}

// taskID reads the "id" of a task body, or "".
func taskID(body []byte) string {
	var t struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &t) != nil {
		return ""
	}
	return t.ID
}

func isJSONObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && json.Valid(b)
}

// trimUTF8Front drops bytes at the front of s that are not the start of a
// UTF-8 sequence, left over from cutting s at a byte offset.
func trimUTF8Front(s string) string {
	for len(s) > 0 && s[0]&0xC0 == 0x80 {
		s = s[1:]
	}
	return s
}
