package bodypack

import (
	"bytes"
	"testing"
)

const v1 = `{"version": 1, "reply_requested": false, "kwargs": `

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	id := "2adbe2df93a2d35c95189a587675abde"
	tests := []struct {
		name   string
		body   string
		id     string
		stored string // Encode's result
	}{
		{"v1 envelope", v1 + `"{\"n\": 1}", "num_retries": 0, "id": "` + id + `"}`, id, "f" + `"{\"n\": 1}"`},
		{"v2 with a reply", `{"version": 2, "reply_requested": true, "kwargs": "{}", "id": "` + id + `"}`, id, "n" + `"{}"`},
		{"ending names another ID", v1 + `"{}", "id": "other"}`, id, "d" + `"{}", "id": "other"}`},
		{"no task ID", v1 + `"{}", "num_retries": 0, "id": ""}`, "", "f" + `"{}"`},
		{"plain text starting with a header letter", "c-body", id, "ac-body"},
		{"binary", "\x00\xff\"}", id, "a\x00\xff\"}"},
		{"empty", "", id, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := Encode([]byte(tt.body), tt.id)
			if string(stored) != tt.stored {
				t.Errorf("Encode = %q; want %q", stored, tt.stored)
			}
			got, ok := Decode(stored, tt.id)
			if !ok || !bytes.Equal(got, []byte(tt.body)) {
				t.Errorf("Decode(%q) = %q, %v; want %q", stored, got, ok, tt.body)
			}
		})
	}
}

func TestDecodeRefusesUnknownHeaders(t *testing.T) {
	t.Parallel()
	for _, stored := range []string{"", "`x", "px", "\x00x", "Ax"} {
		if body, ok := Decode([]byte(stored), "x"); ok {
			t.Errorf("Decode(%q) = %q; want it refused", stored, body)
		}
	}
}

func FuzzEncodeDecode(f *testing.F) {
	f.Add([]byte(v1+`"{}", "num_retries": 0, "id": "x"}`), "x")
	f.Add([]byte("a"), "")
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		stored := Encode(body, id)
		got, ok := Decode(stored, id)
		if !ok || !bytes.Equal(got, body) {
			t.Fatalf("Encode(%q, %q) = %q, which decodes to %q, %v", body, id, stored, got, ok)
		}
		if plain, ok := Decode(EncodePlain(body), "other"); !ok || !bytes.Equal(plain, body) {
			t.Fatalf("EncodePlain(%q) decodes to %q, %v", body, plain, ok)
		}
	})
}
