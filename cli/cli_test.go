package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"90s", 90 * time.Second, false},
		{"10m", 10 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"2d", 48 * time.Hour, false},
		{"1w", 7 * 24 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false},
		{"1.5h", 90 * time.Minute, false},
		{"600", 600 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"0", 0, false},
		{"", 0, true},
		{"10x", 0, true},
		{"-5s", 0, true},
		{"h", 0, true},
		{"1d 2h", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDuration(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseDuration(%q) = %v; want an error", tt.in, got)
				}
				if !strings.Contains(err.Error(), "invalid duration") {
					t.Fatalf("error %q does not say invalid duration", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 10 * time.Minute, 36 * time.Hour, 24 * time.Hour, 14 * 24 * time.Hour, 1500 * time.Millisecond} {
		s := formatDuration(d)
		back, err := ParseDuration(s)
		if err != nil || back != d {
			t.Errorf("formatDuration(%v) = %q, which parses to %v, %v", d, s, back, err)
		}
	}
}

func TestSplitQueueArg(t *testing.T) {
	t.Parallel()
	var q string
	root := (&app{}).rootCommand(&q)
	tests := []struct {
		args      []string
		wantQueue string
		wantRest  string
	}{
		{[]string{"sqlite://x.db", "push", "-c", "echo"}, "sqlite://x.db", "push -c echo"},
		{[]string{"-v", "acct/q", "size"}, "acct/q", "-v size"},
		{[]string{"--log-format", "json", "sb://ns/q", "peek"}, "sb://ns/q", "--log-format json peek"},
		{[]string{"--log-format=json", "sb://ns/q", "peek"}, "sb://ns/q", "--log-format=json peek"},
		{[]string{"push", "-c", "x"}, "", "push -c x"},
		{[]string{"--queue", "sqlite://a", "size"}, "", "--queue sqlite://a size"},
		{[]string{"help", "push"}, "", "help push"},
		{[]string{"dlq", "list"}, "", "dlq list"},
		{nil, "", ""},
	}
	for _, tt := range tests {
		q, rest := splitQueueArg(root, tt.args)
		if q != tt.wantQueue || strings.Join(rest, " ") != tt.wantRest {
			t.Errorf("splitQueueArg(%q) = %q, %q; want %q, %q", tt.args, q, rest, tt.wantQueue, tt.wantRest)
		}
	}
}

func TestParseTaskLine(t *testing.T) {
	t.Parallel()
	flagEnv := []jobq.EnvVar{{Name: "X", Value: "flag"}, {Name: "Y", Value: "y"}}
	tests := []struct {
		name        string
		line        string
		opts        lineOpts
		wantCmd     string
		wantEnv     string
		wantCwd     string
		wantDirsync string
		wantPayload string
		wantErr     string
	}{
		{name: "shell keeps its newline", line: "echo hi\n", opts: lineOpts{env: flagEnv}, wantCmd: "echo hi\n", wantEnv: "X=flag,Y=y"},
		{name: "blank line is a task", line: "\n", wantCmd: "\n"},
		{name: "leading space is not JSON", line: " {\"cmd\": 1}\n", wantCmd: " {\"cmd\": 1}\n"},
		{name: "shell with dirsync and cwd", line: "x", opts: lineOpts{dirsync: "/out", cwd: "/w"}, wantCmd: "x", wantDirsync: "/out", wantCwd: "/w"},
		{name: "empty -c", line: "", opts: lineOpts{env: flagEnv}, wantPayload: `{"cmd": "", "bg_dirsync_to": null, "env": {"X": "flag", "Y": "y"}}`},
		{name: "json: order kept, -e updates env, bg_dirsync_to appended", line: `{"cwd": "/tmp", "cmd": "echo $X", "env": {"Z": "z", "X": "json"}}` + "\n", opts: lineOpts{env: flagEnv},
			wantPayload: `{"cwd": "/tmp", "cmd": "echo $X", "env": {"Z": "z", "X": "flag", "Y": "y"}, "bg_dirsync_to": null}`},
		{name: "json: env appended when missing, then dirsync", line: `{"cmd":"c"}`, opts: lineOpts{dirsync: "/d"},
			wantPayload: `{"cmd": "c", "env": {}, "bg_dirsync_to": "/d"}`},
		{name: "json: own bg_dirsync_to kept", line: `{"cmd": "c", "bg_dirsync_to": "/mine"}`, opts: lineOpts{dirsync: "/d"},
			wantPayload: `{"cmd": "c", "bg_dirsync_to": "/mine", "env": {}}`},
		{name: "payload", line: `{"model": "m", "steps": 3}`, opts: lineOpts{env: []jobq.EnvVar{{Name: "K", Value: "v"}}},
			wantPayload: `{"model": "m", "steps": 3, "env": {"K": "v"}, "bg_dirsync_to": null}`},
		{name: "json duplicate keys collapse as in Python", line: `{"b": 1, "a": 2, "b": 3}`, wantPayload: `{"b": 3, "a": 2, "env": {}, "bg_dirsync_to": null}`},
		{name: "json env number kept", line: `{"cmd": "x", "env": {"A": 1}}`, wantPayload: `{"cmd": "x", "env": {"A": 1}, "bg_dirsync_to": null}`},
		{name: "bad json", line: `{"cmd": `, wantErr: "invalid JSON task"},
		{name: "trailing data", line: `{"cmd": "x"} [1]`, wantErr: "invalid JSON task"},
		{name: "cmd not string", line: `{"cmd": 3}`, wantErr: `"cmd" must be a string`},
		{name: "dirsync not string", line: `{"cmd": "x", "bg_dirsync_to": 0}`, wantErr: `"bg_dirsync_to" must be a string or null, got a JSON number`},
		{name: "cwd not string", line: `{"cmd": "x", "cwd": ["/"]}`, wantErr: `"cwd" must be a string or null, got a JSON array`},
		{name: "json null dirsync kept", line: `{"cmd": "x", "bg_dirsync_to": null}`, wantPayload: `{"cmd": "x", "bg_dirsync_to": null, "env": {}}`},
		{name: "payload dirsync number kept", line: `{"a": 1, "bg_dirsync_to": 0}`, wantPayload: `{"a": 1, "bg_dirsync_to": 0, "env": {}}`},
		{name: "env null", line: `{"cmd": "x", "env": null}`, wantErr: `"env" must be a JSON object`},
		{name: "env value object", line: `{"cmd": "x", "env": {"A": {}}}`, wantErr: `"env" value of A`},
		{name: "not utf-8", line: "echo \xff\n", wantErr: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task, err := parseTaskLine(tt.line, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, e := range task.Env {
				env = append(env, e.Name+"="+e.Value)
			}
			if task.Command != tt.wantCmd || strings.Join(env, ",") != tt.wantEnv || task.Cwd != tt.wantCwd ||
				task.DirSyncTo != tt.wantDirsync || string(task.Payload) != tt.wantPayload {
				t.Fatalf("task cmd=%q env=%v cwd=%q dirsync=%q payload=%s", task.Command, env, task.Cwd, task.DirSyncTo, task.Payload)
			}
		})
	}
}

// TestRootHelpListsEveryExitCode: the root --help names each exit code the
// command can return.
func TestRootHelpListsEveryExitCode(t *testing.T) {
	t.Parallel()
	_, after, ok := strings.Cut(rootLong, "Exit codes:")
	if !ok {
		t.Fatal("the root help has no 'Exit codes:' paragraph")
	}
	for _, code := range []int{ExitOK, ExitFailure, ExitUsage, ExitPreempted} {
		if !regexp.MustCompile(fmt.Sprintf(`(^|\s)%d\s`, code)).MatchString(after) {
			t.Errorf("the root help's exit codes %q do not mention %d", after, code)
		}
	}
}

// TestHelpQuotesQueueURLs: every example command in --help quotes a queue
// URL that holds ? or &, which zsh globs and every shell splits at.
func TestHelpQuotesQueueURLs(t *testing.T) {
	t.Parallel()
	var q string
	unquoted := regexp.MustCompile("jobq [a-z]+://[^ '\"`]*[?&]")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, text := range []string{c.Long, c.Example} {
			if m := unquoted.FindString(text); m != "" {
				t.Errorf("jobq %s --help shows %q: quote the queue URL", c.CommandPath(), m)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{}).rootCommand(&q))
}

// TestEveryCommandHasHelp: every command (but cobra's own help) says what
// it does and shows an example in its --help.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	var q string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.IsAvailableCommand() || !c.HasParent() {
			if c.Short == "" {
				t.Errorf("%s has no Short description", c.CommandPath())
			}
			if strings.TrimSpace(c.Example) == "" {
				t.Errorf("%s --help shows no example", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "help" {
				walk(sub)
			}
		}
	}
	walk((&app{}).rootCommand(&q))
}
