package driver_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestQueueName: the queue names every backend refuses, from a URL and
// from Options, each with a message naming the setting and the rule.
func TestQueueName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want string // in the error; "" when accepted
	}{
		{"default", ""},
		{"render jobs/étape-2:gpu.v1", ""},
		{"日本語", ""},
		{"", "is empty"},
		{"\x00nul", "control character U+0000"},
		{"a\tb", "control character U+0009"},
		{"a\x7f", "control character U+007F"},
		{"a\u0085", "control character U+0085"},
		{"\xff", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := driver.CheckQueueName("Options.Queue", tt.name)
			p := driver.NewParams(&url.URL{RawQuery: url.Values{"queue": {tt.name}}.Encode()})
			if got := p.Queue("default"); got != tt.name {
				t.Errorf("Params.Queue = %q, want %q", got, tt.name)
			}
			perr := p.Done()
			if tt.want == "" {
				if err != nil || perr != nil {
					t.Fatalf("refused: %v; %v", err, perr)
				}
				return
			}
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "Options.Queue") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckQueueName: %v, want InvalidArgument naming Options.Queue and saying %q", err, tt.want)
			}
			if errcode.Of(perr) != errcode.InvalidArgument || !strings.Contains(perr.Error(), "query parameter queue") || !strings.Contains(perr.Error(), tt.want) {
				t.Errorf("Params.Queue: %v, want InvalidArgument naming the queue parameter and saying %q", perr, tt.want)
			}
		})
	}
}
