package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// tokenCheckKeys is checkKeys as it first was, walking the tokens of a
// json.Decoder: the reference the faster walk must agree with.
func tokenCheckKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return tokenValue(dec, t, "")
}

func tokenValue(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read JSON at %s: %w", pathName(path), err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	t = structural(t)
	switch delim {
	case '{':
		return tokenObject(dec, t, path)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := tokenValue(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	return nil
}

func tokenObject(dec *json.Decoder, t reflect.Type, path string) error {
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
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("read JSON at %s: %w", pathName(path), err)
		}
		key, _ := tok.(string)
		name := key
		if path != "" {
			name = path + "." + key
		}
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
			}
			child = ft
		}
		if err := tokenValue(dec, child, name); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// FuzzCheckKeys: on every JSON value, whatever type it is checked against,
// checkKeys answers as the walk over a json.Decoder's tokens does — the
// same key named in the same words, or nothing.
func FuzzCheckKeys(f *testing.F) {
	for _, seed := range []string{
		`{"project_id":"web","tasks":[{"title":"a"},{"Title":"b"}]}`,
		`{"project_id":"web","tasks":[{"title":"a","metadata":{"team":"x","team":"y"}}]}`,
		`[{"project_id":"web","title":"a","title":"b"}]`,
		`{"id":"nested","repo":{"url":"a","url":"b"}}`,
		`{"\u0069d":"escaped","id":"plain"}`,
		`{"tasks":[{"title":"a","dependencies":[{"id":"x","requires_success":false},{"ID":"y"}]}]}`,
		`{"": {"a": 1, "a": 2}}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
		`{"title":"x","timeout":"10m","not_before":"2026-01-01T00:00:00Z","priority":-1.5e3,"x":[true,false,null,{}]}`,
		" [ ] ", `"just a string"`, `12`, `{"caf\xe9":1,"caf\xef":2}`,
	} {
		f.Add([]byte(seed))
	}
	types := []reflect.Type{
		reflect.TypeFor[models.TaskBatch](), reflect.TypeFor[[]models.BatchTask](), reflect.TypeFor[models.Project](),
		reflect.TypeFor[map[string]any](), reflect.TypeFor[*models.TaskBatch](), reflect.TypeFor[*[]models.BatchTask](), nil,
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // checkKeys reads only what the decoder accepted
		}
		for _, typ := range types {
			got, want := checkKeys(data, typ), tokenCheckKeys(data, typ)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s as %v: %v; the token walk: %v", data, typ, got, want)
			}
		}
	})
}
