package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestBadNumbersAreUsageErrors: every duration and count flag goes through
// one overflow-checked parser. Values that overflow, NaN, and values out of
// a flag's range exit 2 with an error naming the flag and the accepted
// range; the queue is left untouched.
func TestBadNumbersAreUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string // substrings of stderr
	}{
		// Before the shared parser these pushed a task that was ready at
		// once (the duration wrapped around to a negative one).
		{[]string{"push", "-c", "echo", "--delay", "1e10"}, []string{`"--delay"`, "too long", "292 years"}},
		{[]string{"push", "-c", "echo", "--delay", "NaN"}, []string{`"--delay"`, "not a duration"}},
		{[]string{"push", "-c", "echo", "--delay", "Inf"}, []string{`"--delay"`, "not a duration"}},
		{[]string{"push", "-c", "echo", "--delay", "15251w"}, []string{`"--delay"`, "too long"}},
		{[]string{"push", "-c", "echo", "--num-retries", "99999999999"}, []string{`"--num-retries"`, "0 to 2147483647"}},
		{[]string{"push", "-c", "echo", "--priority", "1001"}, []string{`"--priority"`, "-1000 to 1000"}},
		// Was "--visibility-timeout -2562047h47m16.854775808s is too short".
		{[]string{"worker", "--visibility-timeout", "1e10"}, []string{`"--visibility-timeout"`, "too long", "1s or more"}},
		{[]string{"worker", "--visibility-timeout", "500ms"}, []string{`"--visibility-timeout"`, "1s or more"}},
		{[]string{"worker", "--time-limit", "NaN"}, []string{`"--time-limit"`, "not a duration"}},
		{[]string{"worker", "-n", "99999999999"}, []string{`"-n, --num-workers"`, "1 to 2147483647"}},
		{[]string{"worker", "--prefetch", "-2"}, []string{`"--prefetch"`, "0 to 2147483647"}},
		{[]string{"worker", "--max-consecutive-failures", "-7"}, []string{`"--max-consecutive-failures"`, "-1 for no limit"}},
		{[]string{"worker", "--max-lost-leases", "-2"}, []string{`"--max-lost-leases"`, "-1 for no limit"}},
		{[]string{"worker", "--max-lost-leases", "0"}, []string{"--max-lost-leases is 0", "-1 for no limit"}},
		{[]string{"peek", "-n", "0"}, []string{`"-n, --num"`, "1 to 2147483647"}},
		{[]string{"dlq", "list", "-n", "1e3"}, []string{`"-n, --num"`, "not a whole number"}},
		{[]string{"stats", "--sample", "-1s"}, []string{`"--sample"`, "negative"}},
		// Policy keys must be UTF-8 (Azure handed them back as U+FFFD).
		{[]string{"push", "-c", "echo", "--concurrency-key", "g\xffpu"}, []string{"concurrency key", "not valid UTF-8"}},
		{[]string{"policy", "set", "concurrency", "g\xffpu=2"}, []string{"concurrency key", "not valid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			q := sqliteQueue(t)
			code, _, stderr := run(t, append([]string{q}, tt.args...)...)
			if code != cli.ExitUsage {
				t.Fatalf("exit %d, want %d (usage); stderr:\n%s", code, cli.ExitUsage, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestBadDurationInEnvironment: $JOBQ_TIME_LIMIT goes through the same
// parser and is named in the error.
func TestBadDurationInEnvironment(t *testing.T) {
	t.Setenv("JOBQ_TIME_LIMIT", "1e300")
	code, _, stderr := run(t, sqliteQueue(t), "worker")
	if code != cli.ExitUsage || !strings.Contains(stderr, `$JOBQ_TIME_LIMIT="1e300"`) || !strings.Contains(stderr, "too long") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 naming $JOBQ_TIME_LIMIT", code, stderr)
	}
}

// TestBadQueueURLsAreUsageErrors: a queue URL the backend cannot use is a
// usage error (exit 2) naming the problem, whether the URL parser or the
// server finds it.
func TestBadQueueURLsAreUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		// Used database 0 without a word.
		{"redis://127.0.0.1:6379/-1?queue=clihard", `database number "-1"`},
		// Exit 1: the server refused SELECT 99999.
		{"redis://127.0.0.1:6379/99999?queue=clihard", "database 99999 does not exist"},
		// Exit 1, "cannot reach Redis": the server is not a cluster.
		{"redis://127.0.0.1:6379/0?queue=clihard&cluster=true", "the server is not a Redis Cluster"},
		// Exit 1: the server refused every statement.
		{"postgres://127.0.0.1/test?queue=a%00b", "without NUL"},
		{"sqlite:///tmp/x.db?busy_timeout=NaN", `busy_timeout="NaN"`},
		// A URL's flaw is named, the password not shown.
		{"redis://u:s3cr3t@127.0.0.1:notaport/0?queue=clihard", `does not parse as a URL: invalid port ":notaport" after host`},
		{"redis://u:s3cr3t@[::1/0?queue=clihard", "does not parse as a URL: missing ']' in host"},
		// A bad escape in a password is named, the password not shown.
		{"postgres://postgres:p%ZZ@127.0.0.1/test", "has a % not followed by two hex digits; write a % as %25"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := run(t, tt.url, "size")
			if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "s3cr3t") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 saying %q, without the password", code, stderr, tt.want)
			}
		})
	}
}

// TestBadQueueNamesAreRefused: every backend refuses a queue name with a
// NUL, a control character or bytes that are not UTF-8, as a usage error
// naming the queue and what a name may hold; Azure's backends, which take
// the queue from the path, apply their engines' stricter rules and say
// where the name goes.
func TestBadQueueNamesAreRefused(t *testing.T) {
	t.Parallel()
	const portable = "without NUL or other control characters"
	tests := []struct {
		url  string
		want []string
	}{
		{"redis://127.0.0.1:6379/0?queue=%00nul", []string{`queue="\x00nul"`, "control character U+0000", portable}},
		{"redis://127.0.0.1:6379/0?queue=%ff", []string{`queue="\xff"`, "not valid UTF-8", portable}},
		{"redis://127.0.0.1:6379/0?queue=a%1bb", []string{`queue="a\x1bb"`, "U+001B", portable}},
		{"redis://127.0.0.1:6379/0?queue=", []string{"query parameter queue is empty", "queue=default"}},
		{"sqlite:///tmp/jobq-badname.db?queue=%00nul", []string{`queue="\x00nul"`, portable}},
		{"sqlite:///tmp/jobq-badname.db?queue=%ff", []string{`queue="\xff"`, "not valid UTF-8", portable}},
		{"sqlite:///tmp/jobq-badname.db?queue=%c2%85", []string{"U+0085", portable}},
		{"postgres://127.0.0.1/test?queue=%00nul", []string{`queue="\x00nul"`, portable}},
		{"postgres://127.0.0.1/test?queue=%ff", []string{`queue="\xff"`, "not valid UTF-8", portable}},
		{"azqueue://devstoreaccount1/%00nul", []string{`queue name "\x00nul"`, "lowercase letters, digits and single hyphens"}},
		{"azqueue://devstoreaccount1/%ff", []string{`queue name "\xff"`, "lowercase letters, digits and single hyphens"}},
		{"azqueue://devstoreaccount1/q?queue=%00nul", []string{"query parameter queue", "azqueue://ACCOUNT/QUEUE"}},
		{"sb://ns/%00nul", []string{`queue name "\x00nul"`, "use letters, digits"}},
		{"sb://ns/%ff", []string{`queue name "\xff"`, "use letters, digits"}},
		{"sb://ns/q?queue=%ff", []string{"query parameter queue", "sb://NAMESPACE/QUEUE"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := run(t, tt.url, "size")
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestZeroKillTimeoutIsRefused: --kill-timeout 0 and $JOBQ_KILL_TIMEOUT=0
// are usage errors giving the range. They used to be accepted and to give
// stopped tasks 600 s before their SIGKILL, and a stop no bound at all.
func TestZeroKillTimeoutIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"flag", "", []string{"--kill-timeout", "0"}, `"--kill-timeout" flag: out of range; use 1ms or more`},
		{"variable", "0", nil, `$JOBQ_KILL_TIMEOUT="0": out of range; use 1ms or more`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("JOBQ_KILL_TIMEOUT", tt.env)
			code, _, stderr := run(t, append([]string{sqliteQueue(t), "worker"}, tt.args...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 saying %s", code, stderr, tt.want)
			}
		})
	}
}

// TestWorkerWithoutBashClaimsNothing: a worker or pull whose PATH has no
// bash is a usage error before it claims a task. It used to claim each
// task, fail it for want of bash and dead-letter it once its retries were
// spent.
func TestWorkerWithoutBashClaimsNothing(t *testing.T) {
	for _, cmd := range []string{"worker", "pull"} {
		t.Run(cmd, func(t *testing.T) {
			q := sqliteQueue(t)
			if code, _, stderr := run(t, q, "push", "-c", "true"); code != 0 {
				t.Fatalf("push: exit %d: %s", code, stderr)
			}
			t.Setenv("PATH", t.TempDir())
			code, _, stderr := run(t, q, cmd)
			if code != cli.ExitUsage || !strings.Contains(stderr, "bash, which is not on PATH") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 saying bash is not on PATH", code, stderr)
			}
			if code, out, stderr := run(t, q, "stats", "--json"); code != 0 || !strings.Contains(out, `"ready": 1,`) {
				t.Fatalf("stats: exit %d, %s %s; want the task still ready", code, out, stderr)
			}
		})
	}
}
