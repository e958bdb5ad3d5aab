package throttle_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/throttle"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fail spends n wrong guesses from addr, failing the test if one is refused.
func fail(t *testing.T, l *throttle.Limiter, addr string, n int) {
	t.Helper()
	for i := range n {
		a, wait := l.Begin(addr)
		if a == nil {
			t.Fatalf("guess %d from %s refused (retry after %s), want checked", i+1, addr, wait)
		}
		a.Failed()
	}
}

// refused asserts that the next credential from addr is refused, and
// returns the wait.
func refused(t *testing.T, l *throttle.Limiter, addr string) time.Duration {
	t.Helper()
	a, wait := l.Begin(addr)
	if a != nil {
		t.Fatalf("credential from %s checked, want refused", addr)
	}
	if wait < time.Second {
		t.Fatalf("retry after %s, want at least 1s", wait)
	}
	return wait
}

func TestPerSourceBudget(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	l := throttle.New(throttle.Config{Clock: clk, SourceRate: 2, SourceBurst: 10})
	fail(t, l, "192.0.2.1:1000", 10)
	if w := refused(t, l, "192.0.2.1:2000"); w != time.Second {
		t.Errorf("retry after %s, want 1s (one failure regained at 2/s)", w)
	}
	// Another source is untouched.
	fail(t, l, "192.0.2.2:1000", 1)
	// Time regains failures at the rate, no more.
	clk.Advance(time.Second)
	fail(t, l, "192.0.2.1:1000", 2)
	refused(t, l, "192.0.2.1:1000")
	// Refusals are not guesses: they spend nothing.
	for range 100 {
		refused(t, l, "192.0.2.1:1000")
	}
	clk.Advance(500 * time.Millisecond)
	fail(t, l, "192.0.2.1:1000", 1)
}

func TestRightCredentialGivesBackWhatBeginTook(t *testing.T) {
	t.Parallel()
	l := throttle.New(throttle.Config{Clock: clocktest.New(epoch), SourceBurst: 3})
	for range 50 {
		a, _ := l.Begin("192.0.2.1:1")
		if a == nil {
			t.Fatal("right credentials spent the budget")
		}
		a.Succeeded()
	}
	fail(t, l, "192.0.2.1:1", 3)
	refused(t, l, "192.0.2.1:1")
}

func TestConcurrentAttemptsCannotOverspend(t *testing.T) {
	t.Parallel()
	l := throttle.New(throttle.Config{Clock: clocktest.New(epoch), SourceBurst: 10})
	var mu sync.Mutex
	var attempts []*throttle.Attempt
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if a, _ := l.Begin("192.0.2.1:1"); a != nil {
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(attempts) != 10 {
		t.Fatalf("%d attempts allowed at once, want 10 (the burst)", len(attempts))
	}
}

func TestGlobalBudget(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	l := throttle.New(throttle.Config{Clock: clk, SourceRate: 1, SourceBurst: 5, GlobalRate: 1, GlobalBurst: 6})
	fail(t, l, "192.0.2.1:1", 3)
	fail(t, l, "192.0.2.2:1", 3) // the global budget is spent
	// A source that has failed lately is refused although under its own budget.
	refused(t, l, "192.0.2.1:1")
	// A source with no failures is still checked: a flood from others does
	// not keep the owner out.
	for range 20 {
		a, _ := l.Begin("198.51.100.7:1")
		if a == nil {
			t.Fatal("a clean source was refused because of the global budget")
		}
		a.Succeeded()
	}
	// ...but gets one wrong guess only while the global budget is spent.
	fail(t, l, "198.51.100.8:1", 1)
	refused(t, l, "198.51.100.8:1")
	clk.Advance(time.Second)
	fail(t, l, "192.0.2.1:1", 1)
}

func TestSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1:443", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:443", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:80", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"127.0.0.1", "127.0.0.1"},
		{"@", "@"},
	} {
		if got := throttle.Source(tc.in); got != tc.want {
			t.Errorf("Source(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFailuresAreLoggedSummarised(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	l := throttle.New(throttle.Config{Clock: clk, Logger: log, SourceRate: 1, SourceBurst: 10, LogInterval: time.Minute})
	fail(t, l, "192.0.2.1:1", 10)
	for range 500 {
		refused(t, l, "192.0.2.1:1")
	}
	if got := strings.Count(buf.String(), "\n"); got != 1 {
		t.Fatalf("%d warnings within the interval, want 1 (the first failure):\n%s", got, buf.String())
	}
	clk.Advance(time.Minute)
	fail(t, l, "192.0.2.1:1", 1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="authentication failures" source=192.0.2.1 failed=1 refused=0 throttled=false`,
		// The rest of the interval, written when the source is forgotten.
		`level=WARN msg="authentication failures" source=192.0.2.1 failed=9 refused=500 throttled=false`,
		`level=WARN msg="authentication failures" source=192.0.2.1 failed=1 refused=0 throttled=false`,
	}
	if len(lines) != len(want) {
		t.Fatalf("warnings:\n%s\nwant:\n%s", buf.String(), strings.Join(want, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("warning %d:\n got %s\nwant %s", i+1, lines[i], want[i])
		}
	}
}
