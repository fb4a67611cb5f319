package azqueue

import (
	"strings"
	"testing"
)

func TestBlobServiceURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://acct.queue.core.windows.net/", "https://acct.blob.core.windows.net/"},
		{"https://acct.queue.core.chinacloudapi.cn", "https://acct.blob.core.chinacloudapi.cn"},
		{"http://127.0.0.1:10001/devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1"},
		{"https://queue.example.com/", ""},
	}
	for _, tt := range tests {
		got, err := blobServiceURL(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("blobServiceURL(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("blobServiceURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultResultsContainer(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 50) + "-" + strings.Repeat("b", 5)
	tests := []struct{ queue, want string }{
		{"etl", "etl-results"},
		{long, ""},
	}
	for _, tt := range tests {
		got := DefaultResultsContainer(tt.queue)
		if tt.want != "" && got != tt.want {
			t.Errorf("DefaultResultsContainer(%q) = %q, want %q", tt.queue, got, tt.want)
		}
		if len(got) > 63 || strings.Contains(got, "--") || !strings.HasSuffix(got, ResultsSuffix) {
			t.Errorf("DefaultResultsContainer(%q) = %q: not a valid container name", tt.queue, got)
		}
	}
	if DefaultResultsContainer(long) == DefaultResultsContainer(long[:len(long)-1]+"c") {
		t.Error("two long queue names share a result container")
	}
}
