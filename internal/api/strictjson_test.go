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

// FuzzDecodeBatch: DecodeBatch, which walks the keys before decoding to
// size the tasks, answers as decoding first and checking the keys after
// does — the same error in the same words, or the same batch.
func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{
		`{"project_id":"web","tasks":[{"title":"a"},{"Title":"b"}]}`,
		`{"project_id":"web","tasks":[{"title":"a","title":"b"}],"tasks":[]}`,
		`{"project_id":"web","tasks":[{"title":1}]}`,
		`{"project_id":"web","tasks":[{"title":"a","dependencies":[{"id":"x"},{"id":"y","id":"z"}]}]}`,
		`{"project_id":"web","tasks":[{"title":"a","bogus":1}]}`,
		`{"project_id":"web","Tasks":[{"title":"a"}]}`,
		`{"project_id":"web","tasks":null}`,
		`{"project_id":"web","tasks":[]}`,
		`{"project_id":"web"}`,
		`[{"project_id":"web","title":"a"},{"project_id":"web","title":"b"}] x`,
		`[{"project_id":"web","title":"a","title":"b"}]`,
		` [ ] `, `[1,2]`, `{"tasks":[{},{}`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := DecodeBatch(data)
		var want models.TaskBatch
		var wantErr error
		if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
			wantErr = decodeJSON(data, &want.Tasks)
		} else {
			wantErr = decodeJSON(data, &want)
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: %v; decoded then checked: %v", data, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v; decoded then checked: %+v", data, got, want)
		}
	})
}

// TestDecodeBatchMakesTasksOnce: the tasks of a batch, in either form,
// are made at their number, not grown one at a time to a larger capacity.
func TestDecodeBatchMakesTasksOnce(t *testing.T) {
	t.Parallel()
	tasks := make([]string, 10)
	for i := range tasks {
		tasks[i] = fmt.Sprintf(`{"project_id":"p","title":"t%d","dependencies":[{"id":"x"}]}`, i)
	}
	list := "[" + strings.Join(tasks, ",") + "]"
	for _, body := range []string{list, `{"project_id":"p","tasks":` + list + `}`} {
		b, err := DecodeBatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Tasks) != 10 || cap(b.Tasks) != 10 {
			t.Errorf("%.30s…: %d tasks in a capacity of %d, want 10 in 10", body, len(b.Tasks), cap(b.Tasks))
		}
	}
}

// TestCountKeys: the walk counts the elements of the array it is asked
// about, and no other.
func TestCountKeys(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[*models.TaskBatch]()
	for _, tc := range []struct {
		body, member string
		want         int
	}{
		{`{"tasks":[{},{},{}]}`, "tasks", 3},
		{`{"project_id":"p","tasks":[{"title":"a","acceptance_criteria":["x","y","z","w"]}]}`, "tasks", 1},
		{`{"tasks":[]}`, "tasks", 0},
		{`{"Tasks":[{},{}]}`, "tasks", 0},
		{`{"x":{"tasks":[{},{}]}}`, "tasks", 0},
		{`[{},{},{},{}]`, "", 4},
		{`[[1,2,3]]`, "", 1},
		{`{"tasks":[{},{}`, "tasks", 0},
	} {
		got, _ := countKeys([]byte(tc.body), typ, tc.member)
		if got != tc.want {
			t.Errorf("countKeys(%s, %q) = %d, want %d", tc.body, tc.member, got, tc.want)
		}
	}
}

// TestCheckKeysAllocationsDoNotGrowWithKeys: the walk reads keys in
// place; a body of ten times the objects costs no more allocations.
func TestCheckKeysAllocationsDoNotGrowWithKeys(t *testing.T) {
	body := func(n int) []byte {
		tasks := make([]string, n)
		for i := range tasks {
			tasks[i] = fmt.Sprintf(`{"id":"t%d","title":"task","dependencies":[{"id":"a"},{"id":"b","requires_success":false}]}`, i)
		}
		return []byte(`{"project_id":"p","tasks":[` + strings.Join(tasks, ",") + `]}`)
	}
	typ := reflect.TypeFor[*models.TaskBatch]()
	small, large := body(10), body(100)
	allocs := func(data []byte) float64 {
		return testing.AllocsPerRun(20, func() {
			if err := checkKeys(data, typ); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(small), allocs(large); b > a {
		t.Errorf("checkKeys allocates %v times for 10 tasks, %v for 100", a, b)
	}
}

// FuzzAppendBatchResponse: the answer to a batch is written as
// encoding/json's Encoder writes a BatchResponse, byte for byte, whatever
// the ids and statuses hold.
func FuzzAppendBatchResponse(f *testing.F) {
	f.Add("t1", "web-1", "READY", false, "", "web-2", "DEFINED", true)
	f.Add("<a&b>", "\u2028x\x00", "caf\xe9", true, "\"q\\", "\t\n", "\u00e9", false)
	f.Fuzz(func(t *testing.T, id1, task1, status1 string, skip1 bool, id2, task2, status2 string, skip2 bool) {
		for _, results := range [][]models.BatchResult{
			nil,
			{{LocalID: id1, TaskID: task1, Status: models.TaskStatus(status1), Skipped: skip1}},
			{
				{LocalID: id1, TaskID: task1, Status: models.TaskStatus(status1), Skipped: skip1},
				{LocalID: id2, TaskID: task2, Status: models.TaskStatus(status2), Skipped: skip2},
			},
		} {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(BatchResponse{Results: nonNil(results)}); err != nil {
				t.Fatal(err)
			}
			if got := appendBatchResponse(nil, results); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("%q; encoding/json: %q", got, want.Bytes())
			}
		}
	})
}

// TestWalkStopsAtTheDecodersDepth: the walk before decoding reads a body
// the decoder has not accepted yet; nested deeper than the decoder allows,
// it stops there instead of recursing once per bracket, and the decoder's
// error is the answer.
func TestWalkStopsAtTheDecodersDepth(t *testing.T) {
	t.Parallel()
	deep := []byte(`{"tasks":` + strings.Repeat("[", 200_000))
	if _, err := countKeys(deep, reflect.TypeFor[*models.TaskBatch](), "tasks"); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("malformed at offset %d", 9+maxDepth-1)) {
		t.Errorf("walk of %d brackets: %v, want malformed where the decoder's limit is passed", 200_000, err)
	}
	_, err := DecodeBatch(deep)
	if err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Errorf("DecodeBatch of %d brackets: %v, want the decoder's error", 200_000, err)
	}
	// As deep as the decoder goes, the walk follows.
	ok := []byte(strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth))
	if err := checkKeys(ok, nil); err != nil {
		t.Errorf("checkKeys of %d nested arrays: %v", maxDepth, err)
	}
	if err := json.Unmarshal(ok, new(any)); err != nil {
		t.Errorf("encoding/json on %d nested arrays: %v", maxDepth, err)
	}
}
