package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jobq/jobq/errcode"
)

type coded struct{ c errcode.Code }

func (e coded) Error() string           { return "coded" }
func (e coded) ErrorCode() errcode.Code { return e.c }
func (e coded) Is(target error) bool    { return errcode.Matches(e.c, target) }

func TestOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want errcode.Code
	}{
		{"nil", nil, errcode.Unknown},
		{"plain", errors.New("x"), errcode.Unknown},
		{"coded wrapped", fmt.Errorf("a: %w", coded{errcode.LockLost}), errcode.LockLost},
		{"bare code", errcode.TooLarge, errcode.TooLarge},
		{"canceled", fmt.Errorf("a: %w", context.Canceled), errcode.Canceled},
		{"deadline", context.DeadlineExceeded, errcode.DeadlineExceeded},
	}
	for _, tt := range tests {
		if got := errcode.Of(tt.err); got != tt.want {
			t.Errorf("%s: Of = %v; want %v", tt.name, got, tt.want)
		}
	}
	if !errors.Is(fmt.Errorf("a: %w", coded{errcode.NotFound}), errcode.NotFound) {
		t.Error("errors.Is does not match a wrapped coded error to its code")
	}
	if errors.Is(coded{errcode.NotFound}, errcode.LockLost) {
		t.Error("errors.Is matches a coded error to another code")
	}
}
