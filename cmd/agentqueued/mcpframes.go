package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// mcpParseError is the JSON-RPC code of a frame that is not JSON.
const mcpParseError = -32700

// mcpFrames reads newline-delimited JSON-RPC frames for the MCP server and
// answers each line that is not one JSON value with a -32700 parse error
// itself, passing on only the valid ones: the SDK's stdio transport ends
// the session at the first malformed frame, and one bad line from a
// client would end the agent's tools for the rest of its run. A line
// longer than limit is refused the same way, without being held whole.
type mcpFrames struct {
	src     *bufio.Reader
	closer  io.Closer
	out     *lockedWriter
	limit   int
	pending []byte
}

// lockedWriter serialises writes: the server's answers and the parse
// errors share the one output, and each Write is one whole frame.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close does nothing: the server must not close the program's output.
func (l *lockedWriter) Close() error { return nil }

func newMCPFrames(in io.ReadCloser, out *lockedWriter, limit int) *mcpFrames {
	return &mcpFrames{src: bufio.NewReader(in), closer: in, out: out, limit: limit}
}

// Read passes on the next valid frames.
func (f *mcpFrames) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, tooLong, err := f.readLine()
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			if perr := f.check(line, tooLong); perr != nil {
				if werr := f.answerParseError(perr); werr != nil {
					return 0, werr
				}
			} else {
				f.pending = append(line, '\n')
			}
		}
		if err != nil && len(f.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break // the frame is passed on; the error comes with the next Read
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine returns the next line without its newline; tooLong when it
// passed limit bytes, when the rest of it was read and dropped.
func (f *mcpFrames) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.src.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if f.limit > 0 && len(line) > f.limit+1 {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// check says why line is not one JSON value, nil when it is.
func (f *mcpFrames) check(line []byte, tooLong bool) error {
	if tooLong {
		return fmt.Errorf("the frame is longer than %d bytes", f.limit)
	}
	var v json.RawMessage
	if err := json.Unmarshal(line, &v); err != nil {
		return fmt.Errorf("the frame is not JSON: %w", err)
	}
	return nil
}

// answerParseError writes the JSON-RPC parse error for a bad frame: its id
// cannot be known, so it is null.
func (f *mcpFrames) answerParseError(cause error) error {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string    `json:"jsonrpc"`
		ID      *struct{} `json:"id"`
		Error   rpcError  `json:"error"`
	}{"2.0", nil, rpcError{mcpParseError, "Parse error: " + cause.Error()}})
	if err != nil {
		return err
	}
	_, err = f.out.Write(append(b, '\n'))
	return err
}

// Close closes the input.
func (f *mcpFrames) Close() error { return f.closer.Close() }
