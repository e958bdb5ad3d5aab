package models

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorCode classifies an error for users: it maps to an HTTP status and to
// a chat reply, and is all of an error's internals a user is shown.
type ErrorCode string

// The error codes.
const (
	CodeInvalid      ErrorCode = "invalid"
	CodeNotFound     ErrorCode = "not_found"
	CodeConflict     ErrorCode = "conflict"
	CodeUnauthorized ErrorCode = "unauthorized"
	// CodeUnavailable is a request the daemon cannot serve now but will
	// later by itself (its disk is full); the message says why.
	CodeUnavailable ErrorCode = "unavailable"
	CodeInternal    ErrorCode = "internal"
)

// Error is an error whose message is safe to show to the user who caused it.
type Error struct {
	Code    ErrorCode
	Message string
	// Err is an optional cause, kept for errors.Is/As and logs, never shown.
	Err error
}

// Error returns the user-safe message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with code and message that keeps err as its cause.
func WrapError(code ErrorCode, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCodeOf returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessageOf returns the user-safe message of the first *Error in err's
// chain, or a generic message when there is none: internals never leak.
func ErrorMessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// HTTPStatus is the HTTP status of an error with this code (the API's
// answers and the dashboard's pages); an unknown code is 500.
func (c ErrorCode) HTTPStatus() int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
