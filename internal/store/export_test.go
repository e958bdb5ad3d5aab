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
