package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// expandNode expands environment references in every scalar value under n;
// mapping keys are left alone. path is n's dotted key path. refs, when not
// nil, receives the variables each key's value refers to.
func expandNode(n *yaml.Node, path string, getenv func(string) (string, bool), refs map[string][]string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := expandNode(c, path, getenv, refs); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandNode(n.Content[i+1], joinKey(path, n.Content[i].Value), getenv, refs); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(c, fmt.Sprintf("%s[%d]", path, i), getenv, refs); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		if refs != nil {
			for _, m := range varRef.FindAllStringSubmatch(strings.ReplaceAll(n.Value, "$$", ""), -1) {
				refs[path] = append(refs[path], m[1])
			}
		}
		v, err := Expand(n.Value, getenv)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", n.Line, path, err)
		}
		n.Value = v
		n.Tag = "!!str"
	}
	return nil
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Expand replaces ${NAME} with the value of the environment variable NAME
// (an error when it is unset), ${NAME:-default} with the value of NAME or,
// when NAME is unset or empty, default, and $$ with $. A '$' followed by
// anything else is kept as it is.
func Expand(s string, getenv func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s[i:])
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envName.MatchString(name) {
			return "", fmt.Errorf("${%s}: %q is not an environment variable name", ref, name)
		}
		v, ok := getenv(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name)
		}
		b.WriteString(v)
	}
}

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// varRef finds the names ${NAME} and ${NAME:-default} refer to.
	varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)
)

var (
	unknownFieldRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	typeErrorRE    = regexp.MustCompile(`^line (\d+): cannot unmarshal (!!\w+)`)
)

// describeDecodeError rewrites yaml's decoding errors so that each names
// the full key and its line.
func describeDecodeError(err error, root *yaml.Node) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := unknownFieldRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			key := m[2]
			if p, ok := findKey(root, "", line, key); ok {
				key = p
			}
			msgs = append(msgs, fmt.Sprintf("line %d: unknown key %q", line, key))
			continue
		}
		if m := typeErrorRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			if p, ok := findValue(root, "", line); ok {
				msgs = append(msgs, fmt.Sprintf("line %d: %s: %s", line, p, describeKind(p, m[2])))
				continue
			}
		}
		msgs = append(msgs, e)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// sections are the keys whose values are mappings of further keys.
var sections = map[string]bool{"(top level)": true, "api": true, "log": true, "database": true, "lease": true}

func describeKind(path, tag string) string {
	got := map[string]string{"!!map": "a mapping", "!!seq": "a list"}[tag]
	if got == "" {
		got = "a single value"
	}
	if sections[path] {
		return "expected a mapping of keys, got " + got
	}
	return "expected a single value, got " + got
}

// findKey returns the dotted path of the mapping key named key on line.
func findKey(n *yaml.Node, path string, line int, key string) (string, bool) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if p, ok := findKey(c, path, line, key); ok {
				return p, true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := joinKey(path, k.Value)
			if k.Line == line && k.Value == key {
				return p, true
			}
			if p, ok := findKey(n.Content[i+1], p, line, key); ok {
				return p, true
			}
		}
	}
	return "", false
}

// findValue returns the dotted path of the innermost key whose value starts
// on line; a document that is not a mapping is reported as such.
func findValue(n *yaml.Node, path string, line int) (string, bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if c.Kind != yaml.MappingNode {
				return "(top level)", true
			}
			if p, ok := findValue(c, path, line); ok {
				return p, true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := joinKey(path, n.Content[i].Value)
			v := n.Content[i+1]
			if p, ok := findValue(v, p, line); ok {
				return p, true
			}
			if v.Line == line {
				return p, true
			}
		}
	}
	return "", false
}
