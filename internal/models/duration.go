package models

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in JSON and YAML as a Go duration
// string ("90s", "2h"); a JSON number is read as seconds.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does ("1h30m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 90s or 2h", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("%s is not a duration such as \"90s\" or a number of seconds", b)
	}
	*d = Duration(time.Duration(secs * float64(time.Second)))
	return nil
}

// UnmarshalText reads a duration string (YAML and flags).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 90s or 2h", b)
	}
	*d = Duration(v)
	return nil
}
