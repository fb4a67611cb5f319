package worker

import (
	"fmt"
	"strings"
)

// withheldPrefixes are the variable name prefixes that TaskEnv withholds
// from tasks and gate commands: the worker's own configuration and the
// credentials of the engines and clouds it talks to.
var withheldPrefixes = []string{
	"JOBQ_",                                                              // jobq's own settings: JOBQ_QUEUE, JOBQ_CONNECTION_STRING, JOBQ_STASH, ...
	"AZURE_",                                                             // Azure SDK credentials: AZURE_STORAGE_CONNECTION_STRING, AZURE_CLIENT_SECRET, ...
	"AWS_",                                                               // AWS credentials
	"PG",                                                                 // libpq: PGPASSWORD, PGPASSFILE, PGUSER, PGHOST, ...
	"REDIS",                                                              // REDISCLI_AUTH, REDIS_PASSWORD, REDIS_URL, ...
	"IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "MSI_SECRET", // Azure managed identity
	"GOOGLE_APPLICATION_CREDENTIALS", // Google service account key file
}

// Withheld reports whether TaskEnv keeps the variable name from tasks
// unless it is passed explicitly: every name starting with JOBQ_, AZURE_,
// AWS_, PG or REDIS, and IDENTITY_ENDPOINT, IDENTITY_HEADER, MSI_ENDPOINT,
// MSI_SECRET and GOOGLE_APPLICATION_CREDENTIALS. These hold the worker's
// queue URL, connection strings and the credentials of the services it
// uses; a task is an arbitrary command from whoever can push to the queue.
// Every other variable (PATH, HOME, LANG, CUDA_*, your own) reaches tasks.
func Withheld(name string) bool {
	for _, p := range withheldPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TaskEnv returns base without the variables Withheld names, except those
// that pass lists: a variable name, or a prefix ending in '*' ("AWS_*").
// The Shell handler adds JOBQ_TASK_ID and JOBQ_QUEUE_NAME after it.
func TaskEnv(base, pass []string) []string {
	out := make([]string, 0, len(base))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if Withheld(name) && !passed(name, pass) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func passed(name string, pass []string) bool {
	for _, p := range pass {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// CheckPassEnv validates a list of names for Shell.PassEnv and
// Options.PassEnv: each must be a variable name or a prefix followed by
// '*'.
func CheckPassEnv(pass []string) error {
	for _, p := range pass {
		name := strings.TrimSuffix(p, "*")
		if name == "" || strings.ContainsAny(name, "=*\x00") {
			return fmt.Errorf("%q is not a variable name: give a name such as PGPASSWORD, or a prefix such as AWS_*", p)
		}
	}
	return nil
}
