package models

import (
	"math/rand/v2"
	"regexp"
	"strconv"
)

var adjectives = []string{
	"agile", "amber", "ancient", "arctic", "bold", "brave", "bright", "brisk", "calm", "clear",
	"clever", "cosmic", "crimson", "crisp", "curious", "daring", "deep", "eager", "early", "electric",
	"emerald", "fair", "fast", "fearless", "fierce", "fluent", "fresh", "friendly", "gentle", "gilded",
	"glad", "golden", "grand", "great", "happy", "hidden", "honest", "humble", "icy", "jolly",
	"keen", "kind", "lively", "loyal", "lucky", "lunar", "mellow", "mighty", "misty", "modest",
	"nimble", "noble", "olive", "patient", "plucky", "polar", "prime", "proud", "quick", "quiet",
	"radiant", "rapid", "rustic", "sage", "scarlet", "serene", "sharp", "shiny", "silent", "silver",
	"sleek", "smart", "smooth", "snowy", "solar", "solid", "sound", "spry", "stable", "steady",
	"stellar", "still", "stout", "sturdy", "sunny", "swift", "tidy", "tranquil", "true", "vast",
	"velvet", "vivid", "warm", "wild", "wise", "witty", "young", "zealous", "zesty", "azure",
}

var nouns = []string{
	"anchor", "arrow", "aspen", "atlas", "aurora", "badger", "beacon", "birch", "bison", "bloom",
	"breeze", "bridge", "brook", "canyon", "cascade", "cedar", "comet", "compass", "coral", "crane",
	"crest", "current", "cypress", "dawn", "delta", "dune", "eagle", "echo", "ember", "falcon",
	"fern", "field", "fjord", "flame", "forest", "forge", "fox", "galaxy", "garden", "geyser",
	"glacier", "grove", "harbor", "hawk", "heron", "horizon", "impact", "island", "journey", "lagoon",
	"lantern", "lark", "ledger", "lynx", "maple", "meadow", "mesa", "meteor", "moss", "nexus",
	"oak", "oasis", "ocean", "orbit", "orchid", "otter", "owl", "panda", "path", "peak",
	"pebble", "pine", "planet", "prairie", "quartz", "rapids", "raven", "reef", "ridge", "river",
	"robin", "sail", "sequoia", "shore", "signal", "sparrow", "spring", "spruce", "summit", "thicket",
	"tide", "timber", "trail", "tundra", "valley", "vault", "violet", "willow", "wren", "zenith",
}

var taskIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,79}$`)

// ValidTaskID reports whether id has the shape of a task id.
func ValidTaskID(id string) bool { return taskIDPattern.MatchString(id) }

// RandomTaskName returns an adjective-noun pair such as "bold-orbit".
func RandomTaskName(r *rand.Rand) string {
	return adjectives[r.IntN(len(adjectives))] + "-" + nouns[r.IntN(len(nouns))]
}

// UniqueTaskName returns a random adjective-noun pair; when taken reports
// it in use, a suffix is appended ("bold-orbit-2", "bold-orbit-3", …) until
// a free id is found.
func UniqueTaskName(r *rand.Rand, taken func(string) (bool, error)) (string, error) {
	base := RandomTaskName(r)
	name := base
	for n := 2; ; n++ {
		used, err := taken(name)
		if err != nil {
			return "", err
		}
		if !used {
			return name, nil
		}
		name = base + "-" + strconv.Itoa(n)
	}
}

// UniqueTaskNames names n tasks at once, as n calls of UniqueTaskName in
// turn would, each name also taken for the calls after it: the same random
// draws, the same suffixes. Instead of one question per candidate, taken is
// asked about many names at a time and answers the ones in use; it is
// asked again only about names that an answer made candidates, so a batch
// of thousands costs a few calls.
func UniqueTaskNames(r *rand.Rand, n int, taken func(names []string) ([]string, error)) ([]string, error) {
	bases := make([]string, n)
	for i := range bases {
		bases[i] = RandomTaskName(r)
	}
	names := make([]string, n)
	// used holds the names known to be in use, asked those already asked.
	used, asked := map[string]bool{}, make(map[string]bool, n)
	mine := make(map[string]bool, n)
	for {
		// Each name as UniqueTaskName picks it, taking a name not asked
		// about yet as free; the names so taken are asked about, and the
		// pass is made again until every name picked was known free.
		clear(mine)
		var unknown []string
		for i, base := range bases {
			name := base
			for k := 2; mine[name] || used[name]; k++ {
				name = base + "-" + strconv.Itoa(k)
			}
			if !asked[name] {
				asked[name] = true
				unknown = append(unknown, name)
			}
			mine[name] = true
			names[i] = name
		}
		if len(unknown) == 0 {
			return names, nil
		}
		in, err := taken(unknown)
		if err != nil {
			return nil, err
		}
		for _, name := range in {
			used[name] = true
		}
	}
}
