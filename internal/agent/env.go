package agent

import (
	"maps"
	"slices"
	"strings"
)

// passThrough lists the daemon's environment variables an agent inherits.
var passThrough = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG"}

// Environment builds a run's environment from the daemon's (environ, as
// os.Environ returns it), the agent's configured variables and the run's
// own; later sources win. The result is sorted for stable logs and tests.
func Environment(environ []string, agentEnv, runEnv map[string]string) []string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (slices.Contains(passThrough, k) || strings.HasPrefix(k, "LC_")) {
			env[k] = v
		}
	}
	maps.Copy(env, agentEnv)
	maps.Copy(env, runEnv)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
