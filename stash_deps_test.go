package jobq_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCloudSDK: importing jobq alone links no cloud SDK. The backends and
// the gs:// and azblob:// stash stores that need one are packages of their
// own, linked only by programs that import them.
func TestNoCloudSDK(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps .: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps . listed only %v", deps)
	}
	for _, p := range deps {
		for _, banned := range []string{"cloud.google.com/", "golang.org/x/oauth2", "github.com/Azure/", "google.golang.org/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("package jobq depends on %s; cloud SDKs belong in the backend and stash store packages", p)
			}
		}
	}
}
