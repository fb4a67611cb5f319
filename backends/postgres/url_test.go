package postgres

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
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
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout},
		},
		{
			name: "jobq parameters stripped, libpq and pool parameters kept",
			url:  "postgresql://u:pw@h:5433/db?queue=render&schema=work&sslmode=disable&pool_max_conns=8&poll=250ms&notify_interval=5ms&max_message_bytes=1024&application_name=x&sync_push=false&spin=250us&tcp_user_timeout=5s",
			want: config{connString: "postgres://u:pw@h:5433/db?application_name=x&pool_max_conns=8&sslmode=disable",
				queue: "render", schema: "work", poll: 250 * time.Millisecond, notifyInterval: 5 * time.Millisecond, maxMessageBytes: 1024,
				spin: 250 * time.Microsecond, poolMaxSet: true, tcpUserTimeout: 5 * time.Second},
		},
		{
			name: "server settings through options keep their spaces",
			url:  "postgres://h/db?options=-c%20statement_timeout%3D5s+-c+lock_timeout%3D1s",
			want: config{connString: "postgres://h/db?options=-c%20statement_timeout%3D5s%20-c%20lock_timeout%3D1s", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout},
		},
		{
			name: "pgbouncer: no LISTEN, unnamed statements",
			url:  "postgres://h:6432/db?pgbouncer=true",
			want: config{connString: "postgres://h:6432/db?default_query_exec_mode=exec", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout,
				noListen: true, pgbouncer: true},
		},
		{
			name: "pgbouncer keeps an exec mode the URL sets, and listen=true",
			url:  "postgres://h:6432/db?pgbouncer=true&default_query_exec_mode=simple_protocol&listen=true",
			want: config{connString: "postgres://h:6432/db?default_query_exec_mode=simple_protocol", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout,
				pgbouncer: true},
		},
		{
			name: "listen=false",
			url:  "postgres://h/db?listen=false",
			want: config{connString: "postgres://h/db", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout,
				noListen: true},
		},
		{name: "bad pgbouncer", url: "postgres://h/db?pgbouncer=yes please", wantErr: "pgbouncer="},
		{name: "unknown parameter", url: "postgres://h/db?queu=x", wantErr: "unknown query parameter queu"},
		{name: "server setting as a parameter", url: "postgres://h/db?statement_timeout=5s", wantErr: "options=-c"},
		{name: "bad schema", url: "postgres://h/db?schema=Drop-Table", wantErr: "schema="},
		{name: "semicolon", url: "postgres://h/db?queue=a;b", wantErr: "malformed query"},
		{name: "empty queue", url: "postgres://h/db?queue=", wantErr: "queue="},
		{name: "bad poll", url: "postgres://h/db?poll=soon", wantErr: "poll="},
		{name: "zero poll", url: "postgres://h/db?poll=0s", wantErr: "poll="},
		{name: "bad size", url: "postgres://h/db?max_message_bytes=-1", wantErr: "max_message_bytes="},
		{name: "negative spin", url: "postgres://h/db?spin=-1ms", wantErr: `spin="-1ms": it is negative`},
		{name: "NaN poll", url: "postgres://h/db?poll=NaN", wantErr: `poll="NaN": not a duration`},
		{name: "overflowing size", url: "postgres://h/db?max_message_bytes=99999999999999999999", wantErr: `max_message_bytes="99999999999999999999": out of range`},
		// The server refused every statement with such a name (exit 1).
		{name: "overflowing pool", url: "postgres://h/db?pool_max_conns=99999999999", wantErr: `pool_max_conns="99999999999": out of range`},
		{name: "NaN pool lifetime", url: "postgres://h/db?pool_max_conn_lifetime=NaN", wantErr: `pool_max_conn_lifetime="NaN"`},
		{
			name: "pool durations in jobq's syntax reach pgx in Go's",
			url:  "postgres://h/db?pool_max_conn_lifetime=2d",
			want: config{connString: "postgres://h/db?pool_max_conn_lifetime=48h0m0s", queue: DefaultQueue, schema: DefaultSchema,
				poll: DefaultPoll, notifyInterval: DefaultNotifyInterval, maxMessageBytes: DefaultMaxMessageBytes, syncPush: true, spin: DefaultSpin, tcpUserTimeout: DefaultTCPUserTimeout},
		},
		{name: "NUL in queue", url: "postgres://h/db?queue=a%00b", wantErr: "without NUL"},
		{name: "invalid UTF-8 queue", url: "postgres://h/db?queue=a%FFb", wantErr: "UTF-8"},
		{name: "bad spin", url: "postgres://h/db?spin=fast", wantErr: "spin="},
		{name: "negative tcp_user_timeout", url: "postgres://h/db?tcp_user_timeout=-1s", wantErr: "tcp_user_timeout="},
		{name: "libpq's tcp_user_timeout in milliseconds", url: "postgres://h/db?tcp_user_timeout=30000", wantErr: "tcp_user_timeout="},
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
				if c := errcode.Of(err); c != errcode.InvalidArgument {
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

func TestParseLease(t *testing.T) {
	t.Parallel()
	const u = "fed79ad9-abc8-49cb-9812-a337532fba80"
	uuidBytes := pgtype.UUID{Bytes: [16]byte{0xfe, 0xd7, 0x9a, 0xd9, 0xab, 0xc8, 0x49, 0xcb, 0x98, 0x12, 0xa3, 0x37, 0x53, 0x2f, 0xba, 0x80}, Valid: true}
	tests := []struct {
		id, token string
		want      leaseKey
		ok        bool
	}{
		{"42", leaseToken(u, -7), leaseKey{id: 42, priority: -7, token: uuidBytes}, true},
		{"42", "FED79AD9-ABC8-49CB-9812-A337532FBA80.1000", leaseKey{id: 42, priority: 1000, token: uuidBytes}, true},
		{"42", u, leaseKey{}, false},                                        // no priority
		{"42", u + ".x", leaseKey{}, false},                                 // bad priority
		{"42", "fed79ad9xabc8-49cb-9812-a337532fba80.0", leaseKey{}, false}, // bad uuid
		{"42", "fed79ad9-abc8-49cb-9812-a337532fbag0.0", leaseKey{}, false},
		{"42", "fed79ad9-abc8-49cb-9812-a337532fba8.0", leaseKey{}, false},    // 35 characters
		{"42", "fed79ad9-abc8-49cb-9812-a337532fba8000.0", leaseKey{}, false}, // too long
		{"x", leaseToken(u, 0), leaseKey{}, false},
		{"", "", leaseKey{}, false},
	}
	for _, tt := range tests {
		got, err := parseLease("test", driver.Lease{MessageID: tt.id, Token: tt.token})
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseLease(%q, %q) = %+v, %v; want %+v, ok=%v", tt.id, tt.token, got, err, tt.want, tt.ok)
		}
		if err != nil && errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("parseLease(%q, %q) error code %v, want InvalidArgument", tt.id, tt.token, errcode.Of(err))
		}
	}
}
