package queueurl

import "testing"

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"myaccount/myqueue", "azqueue://myaccount/myqueue"},
		{" myaccount/my-queue ", "azqueue://myaccount/my-queue"},
		{"sqlite://./q.db?queue=a", "sqlite://./q.db?queue=a"},
		{"MyAccount/queue", "MyAccount/queue"},
		{"ab/queue", "ab/queue"},
		{"./local/dir", "./local/dir"},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
