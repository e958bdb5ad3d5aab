package web

// Routes returns the pattern of every route behind the login, as the
// routes name them (under Prefix): each page and form, the event stream
// and, last, the logout.
func Routes() []string {
	out := []string{"GET " + Prefix + "/events"}
	for _, p := range pages {
		out = append(out, p.Pattern)
	}
	for _, a := range actions {
		out = append(out, a.Pattern)
	}
	return append(out, "POST "+Prefix+"/logout")
}
