package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// encoding/json matches object keys to struct fields case-insensitively
// and lets the last of duplicated keys win. checkKeys refuses both: it
// walks a body that decoded without error alongside the type it was
// decoded into, and names the first key that differs in case from every
// field it could be meant for, or that its object repeats.

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkKeys checks every object key of data, a valid JSON value, against
// t, the type data was decoded into: keys of structs must equal a field's
// JSON name exactly, and no object, at any depth, may repeat a key. Values
// decoded by their own UnmarshalJSON and free-form values (maps,
// interfaces) are checked for repeated keys only.
//
// It reads data itself rather than through a json.Decoder's tokens: a
// body of thousands of tasks has hundreds of thousands of tokens, and it
// allocates only for a key with an escape in it and for a message.
func checkKeys(data []byte, t reflect.Type) error {
	w := keyWalker{data: data, countAt: -1}
	return w.walk(t)
}

// countKeys is checkKeys that also answers how many elements the array of
// member (the top-level value itself when member is "") has: a hint to
// size the slice it decodes into, 0 when the walk did not reach its end.
func countKeys(data []byte, t reflect.Type, member string) (int, error) {
	w := keyWalker{data: data, countKey: member}
	if member != "" {
		w.countAt = 1
	}
	err := w.walk(t)
	return w.counted, err
}

// walk walks the one JSON value of data, decoded into t.
func (w *keyWalker) walk(t reflect.Type) error {
	if err := w.value(t); err != nil {
		return err
	}
	w.space()
	if w.pos != len(w.data) {
		return w.malformed()
	}
	return nil
}

// keyWalker walks a JSON value; path holds where it is, as the names of
// the members and the indexes of the elements it is in, spelled out for a
// message only.
type keyWalker struct {
	data []byte
	pos  int
	path []step
	// countAt is the depth of the array whose elements the walk counts
	// into counted (-1: none): 0 for the top-level value, 1 for the
	// top-level object's member countKey.
	countAt  int
	countKey string
	counted  int
	// depth is how many arrays and objects the walk is in.
	depth int
}

// maxDepth is the deepest nesting of arrays and objects the walk follows,
// encoding/json's own limit: a walk before the decoder's (countKeys) must
// not recurse as deep as a body of brackets is long.
const maxDepth = 10_000

// step is one level of a walk's path: an object's member or an array's
// element.
type step struct {
	key   []byte // as the decoder reads it; in data unless escaped
	index int    // for an element; key is then nil
	elem  bool
}

// pathString spells the walk's path as "tasks[1].metadata.team": members
// joined by '.', indexes in brackets.
func (w *keyWalker) pathString() string {
	var b strings.Builder
	for _, st := range w.path {
		switch {
		case st.elem:
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
		case b.Len() > 0:
			b.WriteByte('.')
			b.Write(st.key)
		default:
			b.Write(st.key)
		}
	}
	return b.String()
}

// malformed is the error of data that is not the one JSON value the
// decoder accepted: checkKeys runs after it, so only a caller's mistake.
func (w *keyWalker) malformed() error {
	return fmt.Errorf("read JSON at %s: malformed at offset %d", pathName(w.pathString()), w.pos)
}

func (w *keyWalker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// value walks one JSON value decoded into t (nil: a free-form value).
func (w *keyWalker) value(t reflect.Type) error {
	w.space()
	if w.pos >= len(w.data) {
		return w.malformed()
	}
	switch w.data[w.pos] {
	case '{':
		if w.depth >= maxDepth {
			return w.malformed()
		}
		w.pos++
		w.depth++
		err := w.object(structural(t))
		w.depth--
		return err
	case '[':
		if w.depth >= maxDepth {
			return w.malformed()
		}
		w.pos++
		var elem reflect.Type
		if t = structural(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.depth++
		err := w.array(elem)
		w.depth--
		return err
	case '"':
		_, _, err := w.str()
		return err
	default:
		return w.scalar()
	}
}

// array walks the elements of an array whose '[' has been read.
func (w *keyWalker) array(elem reflect.Type) error {
	w.space()
	if w.pos < len(w.data) && w.data[w.pos] == ']' {
		w.pos++
		return nil
	}
	w.path = append(w.path, step{elem: true})
	at := len(w.path) - 1
	for i := 0; ; i++ {
		w.path[at].index = i
		if err := w.value(elem); err != nil {
			return err
		}
		w.space()
		if w.pos >= len(w.data) {
			return w.malformed()
		}
		c := w.data[w.pos]
		w.pos++
		switch c {
		case ',':
		case ']':
			w.path = w.path[:at]
			if at == w.countAt && (at == 0 || string(w.path[0].key) == w.countKey) {
				w.counted = i + 1
			}
			return nil
		default:
			w.pos--
			return w.malformed()
		}
	}
}

// object walks the members of an object whose '{' has been read, decoded
// into t (a struct, a map, or nil).
func (w *keyWalker) object(t reflect.Type) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	w.space()
	if w.pos < len(w.data) && w.data[w.pos] == '}' {
		w.pos++
		return nil
	}
	// The keys seen: compared in place while they are few, as most
	// objects' are.
	var fewKeys [16][]byte
	few := fewKeys[:0]
	var seen map[string]bool
	w.path = append(w.path, step{})
	at := len(w.path) - 1
	for {
		w.space()
		if w.pos >= len(w.data) || w.data[w.pos] != '"' {
			return w.malformed()
		}
		raw, escaped, err := w.str()
		if err != nil {
			return err
		}
		// A key as the decoder reads it: one with an escape, or bytes
		// that are not UTF-8 (each read as U+FFFD), decoded by it.
		key := raw
		if escaped || !utf8.Valid(raw) {
			var s string
			if err := json.Unmarshal(w.data[w.pos-len(raw)-2:w.pos], &s); err != nil {
				return w.malformed()
			}
			key = []byte(s)
		}
		w.path[at].key = key
		repeated := false
		if seen == nil && len(few) < len(fewKeys) {
			repeated = slices.ContainsFunc(few, func(k []byte) bool { return bytes.Equal(k, key) })
			few = append(few, key)
		} else {
			if seen == nil {
				seen = make(map[string]bool, 2*len(few))
				for _, k := range few {
					seen[string(k)] = true
				}
			}
			repeated = seen[string(key)]
			seen[string(key)] = true
		}
		if repeated {
			return invalid("request body: duplicate key %s: each key may appear once in an object", quoteShort(w.pathString()))
		}
		child := elem
		if fields != nil {
			ft, ok := fields[string(key)]
			if !ok {
				for field := range fields {
					if strings.EqualFold(field, string(key)) {
						return invalid("request body: unknown field %s (keys are case-sensitive: did you mean %q?)",
							quoteShort(w.pathString()), field)
					}
				}
				// The decoder refuses unknown fields before the walk; a key
				// that is still unknown belongs to a free-form value.
			}
			child = ft
		}
		w.space()
		if w.pos >= len(w.data) || w.data[w.pos] != ':' {
			return w.malformed()
		}
		w.pos++
		if err := w.value(child); err != nil {
			return err
		}
		w.space()
		if w.pos >= len(w.data) {
			return w.malformed()
		}
		c := w.data[w.pos]
		w.pos++
		switch c {
		case ',':
		case '}':
			w.path = w.path[:at]
			return nil
		default:
			w.pos--
			return w.malformed()
		}
	}
}

// str reads a string whose '"' is next, answering its bytes between the
// quotes as they stand and whether any is escaped.
func (w *keyWalker) str() (raw []byte, escaped bool, err error) {
	start := w.pos + 1
	for i := start; i < len(w.data); i++ {
		switch w.data[i] {
		case '\\':
			escaped = true
			i++ // the escaped byte, whatever it is
		case '"':
			w.pos = i + 1
			return w.data[start:i], escaped, nil
		}
	}
	return nil, false, w.malformed()
}

// scalar reads a number, true, false or null.
func (w *keyWalker) scalar() error {
	start := w.pos
	for w.pos < len(w.data) && scalarByte(w.data[w.pos]) {
		w.pos++
	}
	if w.pos == start {
		return w.malformed()
	}
	return nil
}

// scalarByte reports whether c can be part of a number, true, false or
// null.
func scalarByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'E'
}

// structuralCache holds structural's answers by type.
var structuralCache sync.Map // reflect.Type → reflect.Type (nil: none)

// structural returns the type whose shape the walk follows, through
// pointers, or nil when t decodes itself or is free-form.
func structural(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	if s, ok := structuralCache.Load(t); ok {
		st, _ := s.(reflect.Type)
		return st
	}
	s := structuralOf(t)
	structuralCache.Store(t, s)
	return s
}

func structuralOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	pt := reflect.PointerTo(t)
	if t.Implements(jsonUnmarshalerType) || pt.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || pt.Implements(textUnmarshalerType) {
		return nil
	}
	return t
}

// fieldCache holds the JSON fields of struct types by type.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns the JSON names of a struct's fields, as encoding/json
// decodes them: tagged names, Go names of untagged exported fields, and
// the fields of embedded untagged structs that a shallower field does not
// hide.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fields[name] = sf.Type
	}
	for _, et := range embedded {
		for name, ft := range jsonFields(et) {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	fieldCache.Store(t, fields)
	return fields
}

func pathName(path string) string {
	if path == "" {
		return "the top level"
	}
	return quoteShort(path)
}

// maxEcho is how many bytes of a value a message repeats before cutting it.
const maxEcho = 64

// quoteShort quotes s for a message, cut to maxEcho bytes with "…" after:
// a request's value is never echoed back at length.
func quoteShort(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.TrimSuffix(shortText(s), "…")) + "…"
}

// shortText cuts s to maxEcho bytes with "…" after, for a message that
// repeats it unquoted.
func shortText(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// utf8Start reports whether b can start a UTF-8 sequence.
func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// shortenQuoted returns msg with every Go-quoted string in it longer than
// maxEcho bytes (unquoted) cut as quoteShort does; messages quote the
// values they repeat, whichever layer wrote them.
func shortenQuoted(msg string) string {
	if len(msg) <= maxEcho+2 {
		return msg
	}
	var b strings.Builder
	rest := msg
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			b.WriteByte('"')
			rest = rest[1:]
			continue
		}
		if s, err := strconv.Unquote(q); err == nil && len(s) > maxEcho {
			b.WriteString(quoteShort(s))
		} else {
			b.WriteString(q)
		}
		rest = rest[len(q):]
	}
}
