package worker

import "testing"

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, line string
		want       procStat
		ok         bool
	}{
		{"plain", "42 (sleep) S 7 42 42 0 -1 4194304 100 0 0 0 15 5 0 0 20 0 1 0 100 5000000 250 18446744073709551615",
			procStat{ppid: 7, ticks: 20, rssPages: 250}, true},
		{"command with spaces and parentheses", "43 (a (b) c) R 1 43 43 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 100 1 9 0",
			procStat{ppid: 1, ticks: 7, rssPages: 9}, true},
		{"truncated", "44 (x) S 1 2 3", procStat{}, false},
		{"no command", "garbage", procStat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseStat([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReadUsageSeesThisProcess(t *testing.T) {
	t.Parallel()
	if u := readUsage(); u.rss <= 0 || u.at.IsZero() {
		t.Errorf("readUsage() = %+v; want this process's resident memory", u)
	}
}
