package main

import "testing"

func TestGCPercentFollowsGOGC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
		set  bool
	}{
		{"unset", nil, DefaultGCPercent, true},
		{"set", map[string]string{"GOGC": "100"}, 0, false},
		{"off", map[string]string{"GOGC": "off"}, 0, false},
	} {
		got, set := gcPercent(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if got != tc.want || set != tc.set {
			t.Errorf("%s: gcPercent = %d, %v; want %d, %v", tc.name, got, set, tc.want, tc.set)
		}
	}
}
