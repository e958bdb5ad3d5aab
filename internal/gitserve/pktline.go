package gitserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Bounds of pkt-lines (git's LARGE_PACKET_MAX) and of a push's commands.
const (
	maxPktLen = 65520
	maxHead   = 1 << 20
)

// flushPkt is the flush-pkt that ends a list of pkt-lines.
var flushPkt = []byte("0000")

// pktLine frames s as one pkt-line.
func pktLine(s string) []byte {
	return fmt.Appendf(nil, "%04x%s", len(s)+4, s)
}

// errMalformed is a push whose commands are not what git sends; its
// message is what the client is told.
var errMalformed = errors.New("malformed push commands")

// malformed returns errMalformed with a detail for the client.
func malformed(detail string) error {
	return fmt.Errorf("%w: %s", errMalformed, detail)
}

// refUpdate is one command of a push: ref from old to new.
type refUpdate struct {
	old, new, ref string
}

// readCommands reads the pkt-lines that open a push's body, up to and
// including the flush-pkt that ends them: optional "shallow <oid>" lines,
// then "<old> <new> <ref>" commands, the first with git's capabilities
// after a NUL. It returns the bytes it read, to be handed on to git
// unchanged, and the commands. A body that ends, or is not framed as git
// frames it, before that flush is errMalformed; an error reading the body
// is returned as it is.
func readCommands(br *bufio.Reader) (raw []byte, cmds []refUpdate, err error) {
	var buf bytes.Buffer
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, nil, truncated(err)
		}
		buf.Write(hdr[:])
		n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
		switch {
		case err != nil:
			return nil, nil, malformed("not a pkt-line")
		case n == 0:
			return buf.Bytes(), cmds, nil
		case n < 4:
			return nil, nil, malformed("unexpected special packet")
		case n > maxPktLen:
			return nil, nil, malformed("pkt-line too long")
		case buf.Len()+int(n)-4 > maxHead:
			return nil, nil, malformed("too many commands")
		}
		payload := make([]byte, n-4)
		if _, err := io.ReadFull(br, payload); err != nil {
			return nil, nil, truncated(err)
		}
		buf.Write(payload)
		line := strings.TrimSuffix(string(payload), "\n")
		if oid, ok := strings.CutPrefix(line, "shallow "); ok && len(cmds) == 0 {
			if !isOID(oid) {
				return nil, nil, malformed("bad shallow line")
			}
			continue
		}
		if len(cmds) == 0 {
			line, _, _ = strings.Cut(line, "\x00")
		}
		f := strings.Split(line, " ")
		if len(f) != 3 || !isOID(f[0]) || !isOID(f[1]) || len(f[0]) != len(f[1]) || f[2] == "" {
			return nil, nil, malformed("bad command")
		}
		cmds = append(cmds, refUpdate{old: f[0], new: f[1], ref: f[2]})
	}
}

// truncated is the error of a read of the commands that failed with err:
// the body's end is a malformed push, anything else is the body's failure.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("truncated")
	}
	return err
}

// isOID reports whether s is an object name: 40 (SHA-1) or 64 (SHA-256)
// lower-case hex digits.
func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// allowed returns why the commands may not run, or "" when each creates or
// updates a branch of push.
func allowed(cmds []refUpdate, push []string) string {
	for _, c := range cmds {
		switch {
		case strings.Trim(c.new, "0") == "":
			return fmt.Sprintf("deleting %q is not allowed", c.ref)
		case strings.HasPrefix(c.ref, "refs/tags/"):
			return fmt.Sprintf("pushing tags is not allowed (%q)", c.ref)
		case !strings.HasPrefix(c.ref, "refs/heads/") || !slices.Contains(push, c.ref):
			return fmt.Sprintf("updating %q is not allowed; a push may update only %s", c.ref, strings.Join(push, ", "))
		}
	}
	return ""
}
