package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the code and user-safe message of an error answer.
type ErrorDetail struct {
	Code    models.ErrorCode `json:"code"`
	Message string           `json:"message"`
}

// httpError is a request error that needs a status other than its code's.
type httpError struct {
	status int
	err    *models.Error
}

func (e *httpError) Error() string { return e.err.Message }
func (e *httpError) Unwrap() error { return e.err }

func invalid(format string, args ...any) error {
	return models.Errorf(models.CodeInvalid, format, args...)
}

// writeJSON answers v with status.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		s.writeError(w, r, fmt.Errorf("encode %T answer: %w", v, err))
		return
	}
	writeEncoded(w, status, buf.Bytes())
}

// writeEncoded answers status with body, JSON already encoded.
func writeEncoded(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err: *models.Error values with their code and
// message, anything else as a logged internal error with a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := s.errorAnswer(r, err)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorAnswer is the status and body that answer err to request r; an
// internal error is logged and answered "internal error".
func (s *Server) errorAnswer(r *http.Request, err error) (int, []byte) {
	code := models.ErrorCodeOf(err)
	status := code.HTTPStatus()
	msg := models.ErrorMessageOf(err)
	var he *httpError
	if errors.As(err, &he) {
		// The server's own answer: its message is safe whatever the code.
		status, msg = he.status, he.err.Message
	} else if code == models.CodeInternal {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", logPath(r.URL.Path), "err", err)
		msg = "internal error"
	}
	msg = shortenQuoted(msg)
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
	return status, append(body, '\n')
}

// readBody reads a request body of at most Config.MaxBodyBytes with a JSON
// (or absent) Content-Type.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, &httpError{status: http.StatusUnsupportedMediaType,
				err: models.Errorf(models.CodeInvalid, "request body: Content-Type must be application/json (got %q)", ct)}
		}
	}
	// Read into a buffer of the announced length (the server holds the
	// body to it), not one grown from 512 bytes by doubling.
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	data := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{status: http.StatusRequestEntityTooLarge,
				err: models.Errorf(models.CodeInvalid, "request body: larger than %d bytes", mbe.Limit)}
		}
		return nil, bodyReadError(err)
	}
	return data, nil
}

// bodyReadError describes a failed body read: a client too slow to send
// its body within the server's read timeout is a 408.
func bodyReadError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &httpError{status: http.StatusRequestTimeout,
			err: models.WrapError(models.CodeInvalid, err, "request body: not received in time")}
	}
	return models.WrapError(models.CodeInvalid, err, "request body: could not be read")
}

// decodeBody decodes the request body into v (see decodeJSON).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(data, v)
}

// decodeJSON decodes exactly one JSON value from data into v: unknown
// fields and trailing data are errors, and every error names the problem.
func decodeJSON(data []byte, v any) error {
	return decodeSized(data, v, "", nil)
}

// decodeSized is decodeJSON that, when size is set, first walks the keys
// and calls size with the number of elements of the array of member (of
// the top-level value when member is ""), before the decoder fills v: the
// slice it fills can then be made once, not grown an element at a time
// through reflection. The errors are decodeJSON's: the decoder's first,
// then the walk's.
func decodeSized(data []byte, v any, member string, size func(n int)) error {
	var keyErr error
	if size != nil {
		var n int
		n, keyErr = countKeys(data, reflect.TypeOf(v), member)
		if n > 0 {
			size(n)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("request body: unexpected data after the JSON value at offset %d", dec.InputOffset())
	}
	if size != nil {
		return keyErr
	}
	// The value decoded: now refuse what encoding/json lets through, keys
	// that match a field only when case is ignored, and repeated keys.
	return checkKeys(data, reflect.TypeOf(v))
}

func describeJSONError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return invalid("request body: empty, expected a JSON value")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("request body: JSON ends unexpectedly")
	case errors.As(err, &syn):
		return invalid("request body: invalid JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("request body: expected %s, got JSON %s", jsonKind(typ.Type), typ.Value)
		}
		return invalid("request body: field %q: expected %s, got JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if name, err := strconv.Unquote(field); err == nil {
			field = quoteShort(name)
		}
		return invalid("request body: unknown field %s", field)
	}
	return models.WrapError(models.CodeInvalid, err, "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names a Go type the way a JSON author thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "a string (RFC 3339 time)"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// noQuery refuses query parameters on endpoints that take none.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return invalid("query parameters are not accepted on %s", r.URL.Path)
	}
	return nil
}

// nonNil makes nil slices encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
