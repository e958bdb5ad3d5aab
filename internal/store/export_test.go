package store

import "context"

// ExecForTest runs a statement on the write connection.
func ExecForTest(s *Store, q string) error {
	_, err := s.wdb.ExecContext(context.Background(), q)
	return err
}

// CountForTest runs a count query.
func CountForTest(s *Store, q string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(context.Background(), q).Scan(&n)
	return n, err
}

// QueryPlanForTest returns SQLite's plan for q.
func QueryPlanForTest(s *Store, q string, args ...any) (string, error) {
	rows, err := s.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan += detail + "\n"
	}
	return plan, rows.Err()
}

// HotQueriesForTest returns the named queries of queries.go.
func HotQueriesForTest() map[string]string {
	return map[string]string{
		"qEdgeCounts": qEdgeCounts, "qBrokenRoot": qBrokenRoot, "qStatusReason": qStatusReason,
		"qLastEvent": qLastEvent, "qUpdateStatus": qUpdateStatus, "qInsertEvent": qInsertEvent,
		"qSatisfyEdges": qSatisfyEdges, "qBreakEdges": qBreakEdges, "qWithdrawEdges": qWithdrawEdges,
		"qDependentsToCheck": qDependentsToCheck, "qRepoOwner": qRepoOwner, "qProjectStatus": qProjectStatus,
		"qTaskStatus": qTaskStatus, "qTaskExists": qTaskExists, "qUpstreams": qUpstreams,
		"qTaskEvents": qTaskEvents, "qPendingOutbox": qPendingOutbox, "qTokensSince": qTokensSince,
		"qAgentSecondsInWindow": qAgentSecondsInWindow, "qCompletedInWindow": qCompletedInWindow,
		"qReadyPerProject": qReadyPerProject, "qTokensInWindow": qTokensInWindow,
	}
}
