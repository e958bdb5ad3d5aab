package models

import (
	"net/netip"
	"strings"
)

// ValidHostName reports whether h is a DNS host name: dot-separated labels
// of letters, digits and '-', none starting or ending with '-' (a trailing
// dot is allowed).
func ValidHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// IsLoopbackHost reports whether host (without a port or brackets) is
// "localhost" or a loopback address (127.0.0.0/8, ::1), in any case and
// with or without a trailing dot.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
