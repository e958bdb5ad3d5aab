package web

import "testing"

// TestPercent: a part of a whole in whole percent, rounded down; the whole
// of itself is 100% whatever floating point makes of it (675.0076500006485
// of itself came out 99.99999999999999, shown as 99%: the overview said a
// project that had all the agent time had 99% of it).
func TestPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		part, whole float64
		want        int
	}{
		{675.0076500006485, 675.0076500006485, 100},
		{1, 3, 33},
		{2, 3, 66},
		{0, 5, 0},
		{5, 0, 0},
		{7, 5, 100},
		{0.999, 100, 0},
	} {
		if got := percent(tc.part, tc.whole); got != tc.want {
			t.Errorf("percent(%v, %v) = %d, want %d", tc.part, tc.whole, got, tc.want)
		}
	}
	for i := 1; i <= 100000; i++ {
		x := float64(i) * 0.0137
		if got := percent(x, x); got != 100 {
			t.Fatalf("percent(%v, %v) = %d, want 100", x, x, got)
		}
	}
}
