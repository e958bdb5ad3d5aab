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
