package envmask

import (
	"slices"
	"testing"

	"github.com/jobq/jobq"
)

func TestSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"API_TOKEN", true},
		{"api_token", true},
		{"HF_TOKEN", true},
		{"GITHUB_TOKEN", true},
		{"HFTOKEN", true},
		{"DB_PASSWORD", true},
		{"PGPASSWORD", true},
		{"MYSQL_PWD", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"AWS_ACCESS_KEY_ID", true},
		{"OPENAI_API_KEY", true},
		{"APIKEY", true},
		{"AZURE_STORAGE_CONNECTION_STRING", true},
		{"ConnectionString", true},
		{"storageAccountKey", true},
		{"AZURE_CLIENT_SECRET", true},
		{"GOOGLE_CREDENTIALS", true},
		{"REDISCLI_AUTH", true},
		{"SAS", true},
		{"BLOB_SAS_URL", true},
		{"my-secret", true},
		{"x.password", true},
		{"PATH", false},
		{"HOME", false},
		{"MONKEY", false},
		{"KEYBOARD_LAYOUT", false},
		{"AUTHOR", false},
		{"PASSAGE", false},
		{"CUDA_VISIBLE_DEVICES", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := Secret(tt.name); got != tt.want {
			t.Errorf("Secret(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	env := []jobq.EnvVar{{Name: "PLAIN", Value: "p"}, {Name: "API_TOKEN", Value: "tok"}, {Name: "EMPTY_TOKEN", Value: ""}}
	got := Env(env)
	want := []jobq.EnvVar{{Name: "PLAIN", Value: "p"}, {Name: "API_TOKEN", Value: Masked}, {Name: "EMPTY_TOKEN", Value: ""}}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %v; want %v", got, want)
	}
	if env[1].Value != "tok" {
		t.Errorf("Env changed its argument: %v", env)
	}
	if plain := env[:1]; &Env(plain)[0] != &plain[0] {
		t.Errorf("Env copied an environment without secrets")
	}
}

func TestBodyAndKwargs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		f              func([]byte) []byte
	}{
		{"v1 body", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"run\", \"bg_dirsync_to\": null, \"env\": {\"API_TOKEN\": \"tok\", \"PLAIN\": \"p\"}}", "num_retries": 0, "id": "x"}`,
			`{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"run\", \"bg_dirsync_to\": null, \"env\": {\"API_TOKEN\": \"****\", \"PLAIN\": \"p\"}}", "num_retries": 0, "id": "x"}`, Body},
		{"kwargs as an object", `{"kwargs": {"cmd": "run", "env": {"DB_PASSWORD": "pw"}}}`, `{"kwargs": {"cmd": "run", "env": {"DB_PASSWORD": "****"}}}`, Body},
		{"nothing secret", `{"kwargs":"{\"cmd\": \"run\", \"env\": {\"PLAIN\": \"p\"}}"}`, `{"kwargs":"{\"cmd\": \"run\", \"env\": {\"PLAIN\": \"p\"}}"}`, Body},
		{"not JSON", `not json API_TOKEN=tok`, `not json API_TOKEN=tok`, Body},
		{"kwargs", `{"cmd": "", "env": {"API_KEY": "k"}}`, `{"cmd": "", "env": {"API_KEY": "****"}}`, Kwargs},
		{"kwargs without env", `{"x": 1}`, `{"x": 1}`, Kwargs},
	}
	for _, tt := range tests {
		if got := string(tt.f([]byte(tt.in))); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
