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

// PassEnv returns the variables of the daemon's environment (environ, as
// os.Environ returns it) that an agent's pass_env names, and the names
// environ lacks, in the order given. A variable set to the empty string is
// passed as such. Only names are meant for logs: the values are secrets.
func PassEnv(environ []string, names []string) (vars map[string]string, missing []string) {
	if len(names) == 0 {
		return nil, nil
	}
	have := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(names, k) {
			have[k] = v // the last of duplicates wins, as in exec
		}
	}
	vars = map[string]string{}
	for _, n := range names {
		if v, ok := have[n]; ok {
			vars[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	return vars, missing
}
