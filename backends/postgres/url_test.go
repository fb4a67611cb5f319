package postgres

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		want    config
		wantErr string // substring; empty means success
	}{
		{
			name: "defaults",
			url:  "postgres://u@h/db",
			want: config{connString: "postgres://u@h/db", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true},
		},
		{
			name: "jobq parameters stripped, libpq and pool parameters kept",
			url:  "postgresql://u:pw@h:5433/db?queue=render&schema=work&sslmode=disable&pool_max_conns=8&poll=250ms&notify_interval=5ms&max_message_bytes=1024&application_name=x&sync_push=false",
			want: config{connString: "postgres://u:pw@h:5433/db?application_name=x&pool_max_conns=8&sslmode=disable",
				queue: "render", schema: "work", poll: 250 * time.Millisecond, notifyInterval: 5 * time.Millisecond, maxMessageBytes: 1024},
		},
		{name: "unknown parameter", url: "postgres://h/db?queu=x", wantErr: "unknown query parameter queu"},
		{name: "server setting as a parameter", url: "postgres://h/db?statement_timeout=5s", wantErr: "options=-c"},
		{name: "bad schema", url: "postgres://h/db?schema=Drop-Table", wantErr: "schema="},
		{name: "semicolon", url: "postgres://h/db?queue=a;b", wantErr: "malformed query"},
		{name: "empty queue", url: "postgres://h/db?queue=", wantErr: "queue="},
		{name: "bad poll", url: "postgres://h/db?poll=soon", wantErr: "poll="},
		{name: "zero poll", url: "postgres://h/db?poll=0s", wantErr: "poll="},
		{name: "bad size", url: "postgres://h/db?max_message_bytes=-1", wantErr: "max_message_bytes="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseURL(u)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseURL(%s) error = %v, want one containing %q", tt.url, err, tt.wantErr)
				}
				if c := driver.CodeOf(err); c != driver.InvalidArgument {
					t.Errorf("error code = %v, want InvalidArgument", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURL(%s): %v", tt.url, err)
			}
			if *got != tt.want {
				t.Errorf("parseURL(%s)\n got  %+v\n want %+v", tt.url, *got, tt.want)
			}
		})
	}
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"fed79ad9-abc8-49cb-9812-a337532fba80": true,
		"FED79AD9-ABC8-49CB-9812-A337532FBA80": true,
		"fed79ad9-abc8-49cb-9812-a337532fba8":  false,
		"fed79ad9xabc8-49cb-9812-a337532fba80": false,
		"fed79ad9-abc8-49cb-9812-a337532fbag0": false,
		"":                                     false,
	} {
		if got := isUUID(s); got != want {
			t.Errorf("isUUID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestNotifierCoalesces(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{}, 100)
	n := newNotifier(time.Hour, func() { sent <- struct{}{} })
	if !n.inline() {
		t.Fatal("first push after a quiet interval must notify inline")
	}
	for range 10 {
		if n.inline() {
			t.Fatal("a push within the interval must not notify inline")
		}
	}
	// The ten pushes share one trailing notification; flush sends it now.
	n.flush()
	if len(sent) != 1 {
		t.Fatalf("trailing notifications sent = %d, want 1", len(sent))
	}
	n.flush()
	if len(sent) != 1 {
		t.Fatalf("a second flush sent another notification")
	}
}
