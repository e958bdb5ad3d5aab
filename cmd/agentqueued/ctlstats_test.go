package main

import "testing"

// TestMeansAreRoundedForPeople: ctl stats printed a sub-second mean to the
// nanosecond (123.456789ms); every mean is rounded to what a person reads.
func TestMeansAreRoundedForPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		seconds float64
		samples int
		want    string
	}{
		{0, 0, "-"},
		{0.123456789, 3, "123ms"},
		{0.000123456, 1, "123µs"},
		{2.345678, 2, "2.3s"},
		{125.6, 1, "2m6s"},
	} {
		if got := meanOf(tc.seconds, tc.samples); got != tc.want {
			t.Errorf("meanOf(%v, %d) = %q, want %q", tc.seconds, tc.samples, got, tc.want)
		}
	}
}
