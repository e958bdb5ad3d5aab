package models

import "testing"

func TestHostNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host            string
		valid, loopback bool
	}{
		{"localhost", true, true},
		{"LocalHost.", true, true},
		{"127.0.0.1", true, true},
		{"127.8.9.10", true, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"agentqueued.lan", true, false},
		{"10.0.0.2", true, false},
		{"-bad.example", false, false},
		{"bad-.example", false, false},
		{"under_score.example", false, false},
		{"", false, false},
		{"a..b", false, false},
	} {
		if got := ValidHostName(c.host); got != c.valid {
			t.Errorf("ValidHostName(%q) = %v, want %v", c.host, got, c.valid)
		}
		if got := IsLoopbackHost(c.host); got != c.loopback {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", c.host, got, c.loopback)
		}
	}
}
