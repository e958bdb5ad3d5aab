package gitserve

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func TestReadCommands(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	a256, b256 := strings.Repeat("a", 64), strings.Repeat("b", 64)
	cases := []struct {
		name, body string
		want       []refUpdate
	}{
		{"the probe before a large push", "0000", nil},
		{"one command with capabilities", pkt(a+" "+b+" refs/heads/x\x00report-status side-band-64k\n") + "0000",
			[]refUpdate{{a, b, "refs/heads/x"}}},
		{"two commands, no newlines", pkt(a+" "+b+" refs/heads/x\x00atomic") + pkt(b+" "+a+" refs/heads/y") + "0000",
			[]refUpdate{{a, b, "refs/heads/x"}, {b, a, "refs/heads/y"}}},
		{"shallow lines first", pkt("shallow "+a+"\n") + pkt("shallow "+b+"\n") + pkt(a+" "+b+" refs/heads/x\n") + "0000",
			[]refUpdate{{a, b, "refs/heads/x"}}},
		{"SHA-256", pkt(a256+" "+b256+" refs/heads/x\x00object-format=sha256\n") + "0000",
			[]refUpdate{{a256, b256, "refs/heads/x"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const pack = "PACK\x00\x00\x00\x02"
			br := bufio.NewReader(strings.NewReader(tc.body + pack))
			raw, cmds, err := readCommands(br)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.body {
				t.Errorf("raw %q, want %q", raw, tc.body)
			}
			if !slices.Equal(cmds, tc.want) {
				t.Errorf("commands %v, want %v", cmds, tc.want)
			}
			if rest, _ := br.Peek(len(pack)); string(rest) != pack {
				t.Errorf("the pack starts %q after the commands", rest)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	a, b, zero := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("0", 40)
	push := []string{"refs/heads/aq/T-1"}
	cases := []struct {
		cmds []refUpdate
		ok   bool
	}{
		{nil, true},
		{[]refUpdate{{zero, b, "refs/heads/aq/T-1"}}, true},
		{[]refUpdate{{a, b, "refs/heads/aq/T-1"}}, true},
		{[]refUpdate{{a, zero, "refs/heads/aq/T-1"}}, false},
		{[]refUpdate{{a, b, "refs/heads/aq/T-1"}, {a, b, "refs/heads/main"}}, false},
		{[]refUpdate{{zero, b, "refs/tags/aq/T-1"}}, false},
		{[]refUpdate{{zero, b, "refs/heads/aq/T-10"}}, false},
		{[]refUpdate{{zero, b, "refs/heads/aq/T-1/x"}}, false},
	}
	for _, tc := range cases {
		if msg := allowed(tc.cmds, push); (msg == "") != tc.ok {
			t.Errorf("allowed(%v) = %q, want allowed %v", tc.cmds, msg, tc.ok)
		}
	}
	if msg := allowed([]refUpdate{{zero, b, "refs/tags/v1"}}, []string{"refs/tags/v1"}); msg == "" {
		t.Error("a tag granted by name was allowed")
	}
}
