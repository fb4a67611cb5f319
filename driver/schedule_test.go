package driver

import (
	"reflect"
	"testing"
	"time"

	"github.com/jobq/jobq/errcode"
)

func TestScheduleRoundTrip(t *testing.T) {
	t.Parallel()
	spec := ScheduleSpec{Name: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Missed: MissedOnce,
		Task: []byte(`{"version": 1, "kwargs": "{\"cmd\": \"./report.sh\"}"}`), Since: time.UnixMilli(1767225600123)}
	got, err := ParseScheduleSpec(spec.Policy())
	if err != nil || !reflect.DeepEqual(got, spec) {
		t.Errorf("ParseScheduleSpec(spec.Policy()) = %+v, %v; want %+v", got, err, spec)
	}
	for _, f := range []FiredState{
		{Name: "a", Slot: time.UnixMilli(0), Pushed: true, ClaimedAt: time.UnixMilli(0)},
		{Name: "a", Slot: time.UnixMilli(1767225600000), ClaimedAt: time.UnixMilli(1767225605000)},
		{Name: "a", Slot: time.UnixMilli(1767225600000), Pushed: true, ClaimedAt: time.UnixMilli(1767225605000)},
	} {
		got, err := ParseFired(f.Policy())
		if err != nil || !got.Slot.Equal(f.Slot) || got.Pushed != f.Pushed || !got.ClaimedAt.Equal(f.ClaimedAt) || got.Name != f.Name {
			t.Errorf("ParseFired(%+v.Policy()) = %+v, %v", f, got, err)
		}
	}
}

func TestSchedulePolicyValidate(t *testing.T) {
	t.Parallel()
	good := ScheduleSpec{Name: "n", Cron: "@hourly", Task: []byte("{}"), Since: time.Now()}.Policy()
	tests := []struct {
		name string
		p    Policy
		want errcode.Code // Unknown: valid
	}{
		{"definition", good, errcode.Unknown},
		{"no creation time", Policy{Kind: SchedulePolicy, Key: good.Key}, errcode.InvalidArgument},
		{"not the encoding", Policy{Kind: SchedulePolicy, Key: "%zz", Limit: 1}, errcode.InvalidArgument},
		{"no task", Policy{Kind: SchedulePolicy, Key: "name=n&cron=%40hourly", Limit: 1}, errcode.InvalidArgument},
		{"bad name", ScheduleSpec{Name: "a b", Cron: "@hourly", Task: []byte("{}")}.Policy(), errcode.InvalidArgument},
		{"unknown missed", ScheduleSpec{Name: "n", Cron: "@hourly", Missed: "twice", Task: []byte("{}")}.Policy(), errcode.InvalidArgument},
		{"fired", FiredState{Name: "n", Slot: time.Now(), Pushed: true}.Policy(), errcode.Unknown},
		{"fired without a name", Policy{Kind: ScheduleFiredPolicy, Limit: 3}, errcode.InvalidArgument},
		{"paused", SchedulePaused("n", time.Now()), errcode.Unknown},
		{"paused with a period", Policy{Kind: SchedulePausedPolicy, Key: "n", Limit: 1, Period: time.Second}, errcode.InvalidArgument},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if got := errcode.Of(err); (tt.want == errcode.Unknown && err != nil) || (tt.want != errcode.Unknown && got != tt.want) {
			t.Errorf("%s: Validate = %v; want code %v", tt.name, err, tt.want)
		}
	}
}

func TestScheduleTaskIDIsPerSlot(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if ScheduleTaskID("n", slot) != ScheduleTaskID("n", slot.In(berlin)) {
		t.Error("the same slot in two zones has two task IDs")
	}
	if ScheduleTaskID("n", slot) == ScheduleTaskID("n", slot.Add(time.Minute)) || ScheduleTaskID("n", slot) == ScheduleTaskID("m", slot) {
		t.Error("two slots or two schedules share a task ID")
	}
}
