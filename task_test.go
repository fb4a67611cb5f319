package jobq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq/errcode"
)

// TestValidatePayload: a payload must be one JSON object; anything else is
// InvalidArgument with a message that says what it is instead.
func TestValidatePayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		payload string
		want    string // in the error; "" when valid
	}{
		{`{"n": 1}`, ""},
		{" \n\t{}", ""},
		{`{"a": [1, {"b": null}]}`, ""},
		{`[1, 2]`, "it is an array"},
		{`null`, "it is null"},
		{`"x"`, "it is a string"},
		{`3.5`, "it is a number"},
		{`true`, "it is a boolean"},
		{`{"n": 1`, "unexpected end of JSON input"},
		{`{"n": 1} {}`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			t.Parallel()
			err := (&Task{Payload: json.RawMessage(tt.payload)}).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
}
