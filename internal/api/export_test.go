package api

import "slices"

// Patterns returns the patterns of the routes s registers, in the order
// they were registered.
func Patterns(s *Server) []string { return slices.Clone(s.patterns) }
