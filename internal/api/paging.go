package api

import (
	"strconv"
)

// Paging of the list endpoints that can grow without bound: tasks, open
// questions, hook runs and workflow runs. An answer holds at most limit
// items (DefaultPageSize without one; a limit above MaxPageSize is a 400
// naming the maximum) and, when more follow, "next": a cursor that
// ?after= takes to continue. Cursors are opaque: pass them back as they
// are.
const (
	// DefaultPageSize is the number of items a list answers without a limit.
	DefaultPageSize = 100
	// MaxPageSize is the largest limit a list accepts.
	MaxPageSize = 500
)

// parseLimit reads a list's limit parameter: DefaultPageSize when v is
// empty, else an integer from 1 to MaxPageSize.
func parseLimit(v string) (int, error) {
	if v == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, invalid("limit: must be an integer between 1 and %d (got %s)", MaxPageSize, quoteShort(v))
	}
	return n, nil
}

// pageOf cuts items, read with a limit of limit+1, to limit, and returns
// the cursor of the last item kept when one more was read.
func pageOf[T any](items []T, limit int, cursor func(T) string) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, cursor(items[limit-1])
}
