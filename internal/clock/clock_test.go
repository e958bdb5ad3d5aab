package clock_test

import (
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
)

func TestOr(t *testing.T) {
	t.Parallel()
	if _, ok := clock.Or(nil).(clock.Real); !ok {
		t.Errorf("Or(nil) = %T, want clock.Real", clock.Or(nil))
	}
	fake := clocktest.New(time.Unix(0, 0))
	if clock.Or(fake) != fake {
		t.Error("Or(c) is not c")
	}
}

func TestReal(t *testing.T) {
	t.Parallel()
	var c clock.Clock = clock.Real{}
	<-c.After(0) // a zero wait has passed already
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Errorf("Now() = %v, before time.Now() %v", now, before)
	}
}
