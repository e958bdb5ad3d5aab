package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// SetProject returns the workflow document src, YAML or JSON, with its
// top-level project set to project, as `ctl workflow add --project` sends
// it. Only the project is edited: its value is replaced where it stands,
// or, when the document names none, the key is added where no line moves
// (at the end of a block mapping, after the opening brace of a flow or
// JSON one). Every other byte is kept, so the lines and columns of the
// parser's messages are the file's own.
//
// A document that does not read as one top-level mapping is returned as it
// is: the parse that follows reports why.
func SetProject(src []byte, project string) ([]byte, error) {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 ||
		doc.Content[0].Kind != yaml.MappingNode {
		return src, nil
	}
	root := doc.Content[0]
	quoted, err := json.Marshal(project)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "project" {
			return replaceScalar(src, v, string(quoted))
		}
	}
	if root.Style&yaml.FlowStyle != 0 {
		at := offset(src, root.Line, root.Column) // the opening brace
		if at < 0 || at >= len(src) || src[at] != '{' {
			return nil, fmt.Errorf("project: the document's opening brace was not found")
		}
		entry := `"project": ` + string(quoted)
		if len(root.Content) > 0 {
			entry += ", "
		}
		return splice(src, at+1, at+1, entry), nil
	}
	out := bytes.Clone(src)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	indent := bytes.Repeat([]byte(" "), max(root.Column-1, 0))
	out = append(out, indent...)
	return append(out, "project: "+string(quoted)+"\n"...), nil
}

// replaceScalar replaces the text of the one-line scalar v in src by text.
func replaceScalar(src []byte, v *yaml.Node, text string) ([]byte, error) {
	start := offset(src, v.Line, v.Column)
	if v.Kind != yaml.ScalarNode || start < 0 {
		return nil, fmt.Errorf("project: line %d: must be a project id on one line", v.Line)
	}
	end := start
	switch {
	case v.Style&yaml.DoubleQuotedStyle != 0:
		var s string
		dec := json.NewDecoder(bytes.NewReader(src[start:]))
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("project: line %d: must be a project id on one line", v.Line)
		}
		end = start + int(dec.InputOffset())
	case v.Style&yaml.SingleQuotedStyle != 0:
		end = start + 1
		for end < len(src) && !(src[end] == '\'' && (end+1 >= len(src) || src[end+1] != '\'')) {
			if src[end] == '\'' {
				end++ // a doubled quote
			}
			end++
		}
		end++
	case v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return nil, fmt.Errorf("project: line %d: must be a project id on one line", v.Line)
	default: // plain: up to the end of the line, a comment, or the flow's next entry
		for end < len(src) && src[end] != '\n' && src[end] != ',' && src[end] != '}' &&
			!(src[end] == '#' && end > start && (src[end-1] == ' ' || src[end-1] == '\t')) {
			end++
		}
		for end > start && (src[end-1] == ' ' || src[end-1] == '\t' || src[end-1] == '\r') {
			end--
		}
	}
	if end > len(src) || bytes.IndexByte(src[start:end], '\n') >= 0 {
		return nil, fmt.Errorf("project: line %d: must be a project id on one line", v.Line)
	}
	return splice(src, start, end, text), nil
}

// offset is the byte offset of the 1-based line and column (in
// characters) in src, or -1 when src has no such place.
func offset(src []byte, line, col int) int {
	i := 0
	for l := 1; l < line; l++ {
		n := bytes.IndexByte(src[i:], '\n')
		if n < 0 {
			return -1
		}
		i += n + 1
	}
	for c := 1; c < col; c++ {
		if i >= len(src) || src[i] == '\n' {
			return -1
		}
		_, w := utf8.DecodeRune(src[i:])
		i += w
	}
	return i
}

// splice returns src with src[from:to] replaced by text.
func splice(src []byte, from, to int, text string) []byte {
	out := make([]byte, 0, len(src)-(to-from)+len(text))
	out = append(out, src[:from]...)
	out = append(out, text...)
	return append(out, src[to:]...)
}
