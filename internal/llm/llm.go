// Package llm is the daemon's one client of OpenAI-compatible chat models
// (OpenAI, Ollama, vLLM, LiteLLM and the like), built on go-openai: hooks'
// prompts, Discord's command proposals and doctor's check of the endpoint
// all go through it.
//
// New builds the client from the endpoint's base URL, API key and a bound
// on each call; Chat makes one chat completion call and remembers the
// Retry-After of a rate-limited answer; Classify and Describe turn the
// client's errors into an HTTP status, whether another try is worth it,
// and a sentence a user may read. Retrying is the caller's: each has its
// own budget and clock.
//
// The fake endpoint for tests is internal/llm/llmtest.
package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Config is an endpoint and how to reach it.
type Config struct {
	// BaseURL is the endpoint's base, e.g. http://127.0.0.1:11434/v1;
	// empty: OpenAI's. Trailing slashes are dropped.
	BaseURL string
	// APIKey is sent as a bearer token; empty: none.
	APIKey string
	// Timeout bounds each call (Chat, ListModels); 0: only the caller's
	// context does.
	Timeout time.Duration
	// HTTPClient carries the calls; nil: a client with
	// http.DefaultTransport.
	HTTPClient *http.Client
	// Clock reads Retry-After dates; nil: clock.Real.
	Clock clock.Clock
}

// Client calls one OpenAI-compatible endpoint. It is safe for concurrent
// use; RetryAfter is meaningful only to a caller that makes one call at a
// time.
type Client struct {
	oc      *openai.Client
	baseURL string
	timeout time.Duration
	ra      *retryAfter
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	ra := &retryAfter{base: rt, now: clock.Or(cfg.Clock).Now}
	hc := *base
	hc.Transport = ra
	oc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	}
	oc.HTTPClient = &hc
	return &Client{oc: openai.NewClientWithConfig(oc), baseURL: oc.BaseURL, timeout: cfg.Timeout, ra: ra}
}

// BaseURL returns the base URL the client calls (OpenAI's when the
// configuration named none).
func (c *Client) BaseURL() string { return c.baseURL }

// Chat makes one chat completion call, bounded by the client's timeout.
func (c *Client) Chat(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	c.ra.wait.Store(0)
	return c.oc.CreateChatCompletion(ctx, req)
}

// RetryAfter returns the wait the endpoint asked for (Retry-After) in a
// 429 or 503 answer to the last Chat call; 0 when it asked for none.
func (c *Client) RetryAfter() time.Duration { return time.Duration(c.ra.wait.Load()) }

// ListModels returns the ids of the models the endpoint lists.
func (c *Client) ListModels(ctx context.Context) ([]string, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	list, err := c.oc.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// retryAfter remembers the Retry-After of the last 429 or 503 answer.
type retryAfter struct {
	base http.RoundTripper
	now  func() time.Time
	wait atomic.Int64
}

func (t *retryAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		t.wait.Store(int64(ParseRetryAfter(resp.Header.Get("Retry-After"), t.now())))
	}
	return resp, err
}

// ParseRetryAfter reads a Retry-After value, seconds or an HTTP date; 0
// when absent or bad.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Classify returns an error's HTTP status (0 when there is none) and
// whether it is worth another try: rate limits, server failures and
// network errors are; a request the client itself refuses is not.
func Classify(err error) (status int, retryable bool) {
	var (
		ae *openai.APIError
		re *openai.RequestError
		ue *url.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &ae):
		return ae.HTTPStatusCode, ae.HTTPStatusCode == http.StatusTooManyRequests || ae.HTTPStatusCode >= 500
	case errors.As(err, &re):
		return re.HTTPStatusCode, re.HTTPStatusCode == http.StatusTooManyRequests || re.HTTPStatusCode >= 500
	case errors.As(err, &ue), errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return 0, true
	}
	return 0, false
}

// APIError returns the HTTP status and message of an error the endpoint
// answered in OpenAI's error shape ({"error": {"message", ...}}); ok is
// false for any other error, among them answers in another shape.
func APIError(err error) (status int, message string, ok bool) {
	var ae *openai.APIError
	if !errors.As(err, &ae) {
		return 0, "", false
	}
	return ae.HTTPStatusCode, ae.Message, true
}

// Describe is an error of the client as a user may read it; status is
// Classify's.
func Describe(err error, status int) string {
	if _, msg, ok := APIError(err); ok {
		return fmt.Sprintf("the endpoint answered %d: %s", status, msg)
	}
	if status != 0 {
		return fmt.Sprintf("the endpoint answered %d", status)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the endpoint did not answer in time"
	}
	if _, retryable := Classify(err); !retryable {
		return "the request was refused before it was sent: " + err.Error()
	}
	return "the endpoint could not be reached: " + err.Error()
}
