package models

import "time"

// Bounds of a token series query.
const (
	// DefaultTokenSeriesSpan is the time a series covers when the query
	// names no start.
	DefaultTokenSeriesSpan = 24 * time.Hour
	// DefaultTokenSeriesBuckets is how many buckets the span is cut into
	// when the query names no step.
	DefaultTokenSeriesBuckets = 24
	// MinTokenSeriesStep is the shortest bucket.
	MinTokenSeriesStep = time.Minute
	// MaxTokenSeriesBuckets bounds the buckets of one series.
	MaxTokenSeriesBuckets = 1000
)

// TokenSeriesQuery asks for the token ledger summed in buckets of Step
// from Since (inclusive) to Until (exclusive).
type TokenSeriesQuery struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	Step  Duration  `json:"step"`
}

// Validate checks the query's shape once its defaults are filled, naming
// the bad field.
func (q TokenSeriesQuery) Validate() error {
	switch {
	case q.Since.IsZero() || q.Until.IsZero():
		return Errorf(CodeInvalid, "token series: since and until are required")
	case !q.Until.After(q.Since):
		return Errorf(CodeInvalid, "token series: until (%s) must be after since (%s)",
			q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	case q.Step.Std() < MinTokenSeriesStep:
		return Errorf(CodeInvalid, "token series: step %s is shorter than %s", q.Step, Duration(MinTokenSeriesStep))
	case q.Until.Sub(q.Since)/q.Step.Std() >= MaxTokenSeriesBuckets:
		return Errorf(CodeInvalid, "token series: %s in steps of %s is more than %d buckets",
			Duration(q.Until.Sub(q.Since)), q.Step, MaxTokenSeriesBuckets)
	}
	return nil
}

// TokenBucket is the tokens one project's agent used in one bucket. Usage
// without an agent (a hook's LLM calls) has an empty AgentID.
type TokenBucket struct {
	Start     time.Time `json:"start"`
	ProjectID string    `json:"project_id"`
	AgentID   string    `json:"agent_id"`
	Tokens    int64     `json:"tokens"`
}

// TokenSeries is the token ledger summed in buckets: only buckets with
// usage are listed, by start, project and agent.
type TokenSeries struct {
	Since   time.Time     `json:"since"`
	Until   time.Time     `json:"until"`
	Step    Duration      `json:"step"`
	Buckets []TokenBucket `json:"buckets"`
}
