package servicebus

import (
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestDeadLetterTexts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("😀", 3000) + "END" // 4 bytes and 2 UTF-16 units a rune
	for _, tc := range []struct {
		name       string
		body       int
		reason     string
		detail     string
		wantReason string // prefix
		wantDetail string // suffix
	}{
		{"short", 10, "exit 1", "output", "exit 1", "output"},
		{"long texts", 10, long, long, "😀😀", "END"},
		{"large body", MaxMessageBytes, long, long, "😀😀", "END"},
		{"body at the limit", MaxBrokerMessageBytes, "reason", "detail", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &azservicebus.ReceivedMessage{Body: make([]byte, tc.body), ApplicationProperties: map[string]any{PropTaskID: "abc"}}
			reason, detail := deadLetterTexts(m, tc.reason, tc.detail)
			for _, s := range []string{reason, detail} {
				if !utf8.ValidString(s) || len(utf16.Encode([]rune(s))) > MaxDeadLetterTextLen {
					t.Errorf("text of %d UTF-16 units (valid UTF-8: %v), want at most %d", len(utf16.Encode([]rune(s))), utf8.ValidString(s), MaxDeadLetterTextLen)
				}
			}
			if total := tc.body + len(reason) + len(detail) + deadLetterOverhead; total > MaxBrokerMessageBytes && reason+detail != "" {
				t.Errorf("the dead letter would be about %d bytes, over %d", total, MaxBrokerMessageBytes)
			}
			if !strings.HasPrefix(reason, tc.wantReason) || !strings.HasSuffix(detail, tc.wantDetail) {
				t.Errorf("reason %.20q…, detail …%q; want the reason's start and the detail's end", reason, detail[max(0, len(detail)-10):])
			}
		})
	}
}

func TestBrokerClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name    string
		lock    time.Duration
		observe []*time.Time // lock expiries seen at now
		want    time.Duration
	}{
		{"unknown lock duration", 0, []*time.Time{at(time.Hour + time.Minute)}, 0},
		{"no observation", time.Minute, nil, 0},
		{"broker ahead", time.Minute, []*time.Time{at(time.Hour + time.Minute)}, time.Hour},
		{"broker behind", time.Minute, []*time.Time{at(-time.Hour + time.Minute)}, -time.Hour},
		// a lock taken earlier (a message the SDK held back) bounds the offset lower
		{"the largest bound wins", time.Minute, []*time.Time{at(time.Hour + 50*time.Second), at(time.Hour + time.Minute)}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &brokerClock{lock: tc.lock}
			for _, lu := range tc.observe {
				c.observe(lu, now)
			}
			if got := c.offset(); got != tc.want {
				t.Fatalf("offset %v, want %v", got, tc.want)
			}
			if got := c.local(now.Add(tc.want)); !got.Equal(now) {
				t.Fatalf("local(broker now) = %v, want %v", got, now)
			}
		})
	}
	// a bound older than two windows ages out (this machine's clock was stepped)
	c := &brokerClock{lock: time.Minute}
	c.observe(at(time.Hour+time.Minute), now)
	later := now.Add(3 * skewWindow)
	for i := range 2 {
		lu := later.Add(time.Duration(i)*(skewWindow+time.Second) + time.Minute)
		c.observe(&lu, later.Add(time.Duration(i)*(skewWindow+time.Second)))
	}
	if got := c.offset(); got != 0 {
		t.Fatalf("offset %v after the clocks agreed for two windows, want 0", got)
	}
}
