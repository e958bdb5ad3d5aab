package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
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
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := keyWalker{dec: dec}
	return w.value(t, "")
}

type keyWalker struct{ dec *json.Decoder }

// value walks one JSON value decoded into t (nil: a free-form value).
func (w keyWalker) value(t reflect.Type, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return fmt.Errorf("read JSON at %s: %w", pathName(path), err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	t = structural(t)
	switch delim {
	case '{':
		return w.object(t, path)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ']'
		return err
	}
	return nil
}

// object walks the members of an object whose '{' has been read.
func (w keyWalker) object(t reflect.Type, path string) error {
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
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return fmt.Errorf("read JSON at %s: %w", pathName(path), err)
		}
		key, _ := tok.(string)
		name := joinPath(path, key)
		if seen[key] {
			return invalid("request body: duplicate key %s: each key may appear once in an object", quoteShort(name))
		}
		seen[key] = true
		child := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				for field := range fields {
					if strings.EqualFold(field, key) {
						return invalid("request body: unknown field %s (keys are case-sensitive: did you mean %q?)",
							quoteShort(name), field)
					}
				}
				// The decoder refuses unknown fields before the walk; a key
				// that is still unknown belongs to a free-form value.
			}
			child = ft
		}
		if err := w.value(child, name); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return err
}

// structural returns the type whose shape the walk follows, through
// pointers, or nil when t decodes itself or is free-form.
func structural(t reflect.Type) reflect.Type {
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

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
