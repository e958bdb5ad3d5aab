package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// sameAsGeneral fails t when fastBatch reads body differently from the
// general way: what it accepts, the general way accepts and decodes to an
// equal batch. It reports whether fastBatch accepted body.
func sameAsGeneral(t interface {
	Helper()
	Fatalf(string, ...any)
}, body []byte) bool {
	t.Helper()
	fast, ok := fastBatch(body)
	general, err := decodeBatchGeneral(body)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("fastBatch accepted %.300q, which the general way refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, general) {
		t.Fatalf("fastBatch read %.300q as\n%#v\nthe general way as\n%#v", body, fast, general)
	}
	return true
}

// TestFastBatchDecodesAsTheGeneralWay: each body fastBatch reads, it reads
// as encoding/json with the strict checks does; each it gives up on goes
// the general way, whose messages answer it.
func TestFastBatchDecodesAsTheGeneralWay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"project_id":"p","tasks":[{"title":"a"}]}`, true},
		{` [ {"title" : "a" , "dependencies" : [ ] } ] `, true},
		{`{"tasks":[]}`, true},
		{`{}`, true},
		{`[]`, true},
		{`{"created_by":"ana","project_id":"p","tasks":[{"id":"x","title":"naïve ✓","priority":-0,"max_retries":0,
			"requires_approval":true,"is_plan_subtask":false,"metadata":{"team":"a","":""},"acceptance_criteria":[],
			"test_commands":["go test"],"dependencies":[{"id":"y","requires_success":false},{"id":"z"}]}]}`, true},
		{`{"tasks":[{"title":"a"}],"tasks":[]}`, false},                        // a repeated key: refused
		{`{"tasks":[{"Title":"a"}]}`, false},                                   // a key in another case: refused
		{`{"tasks":[{"title":"a","metadata":{"k":"1","k":"2"}}]}`, false},      // refused
		{`{"tasks":[{"title":"a\nb"}]}`, false},                                // an escape: read the general way
		{`{"tasks":[{"title":"a","priority":1e2}]}`, false},                    // refused
		{`{"tasks":[{"title":"a","priority":null}]}`, false},                   // a null
		{`{"tasks":[{"title":"a","priority":01}]}`, false},                     // malformed
		{`{"tasks":[{"title":"a","timeout":"1m"}]}`, false},                    // a member read the general way
		{`{"tasks":[{"title":"a","requires_approval":truex}]}`, false},         // malformed
		{`{"tasks":[{"title":"a"}]} x`, false},                                 // trailing data
		{`{"tasks":[{"title":"a"},]}`, false},                                  // malformed
		{`{"tasks":[{"title":"` + "\xff" + `"}]}`, false},                      // not UTF-8
		{`{"tasks":[{"title":"a","priority":1234567890123456789012}]}`, false}, // too big for an int
		{``, false},
	} {
		if got := sameAsGeneral(t, []byte(tc.body)); got != tc.fast {
			t.Errorf("fastBatch(%.80q) ok = %v, want %v", tc.body, got, tc.fast)
		}
	}
}

// TestFastBatchReadsTheBenchmarkBatch: the body of the batch benchmarks is
// of the shape fastBatch reads, so that they measure it.
func TestFastBatchReadsTheBenchmarkBatch(t *testing.T) {
	t.Parallel()
	body, err := json.Marshal(storetest.RandomBatch(1000, 3000))
	if err != nil {
		t.Fatal(err)
	}
	if !sameAsGeneral(t, body) {
		t.Fatal("fastBatch gave up on the benchmark's batch")
	}
}

// TestFastBatchProperty: random batches, of every member fastBatch reads
// and of some it leaves to the general way, with random spacing and order.
// A batch of the common shape is read by fastBatch; every batch it reads
// is read as the general way reads it.
func TestFastBatchProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		body, plain := batchText(t)
		if got := sameAsGeneral(t, []byte(body)); plain && !got {
			t.Fatalf("fastBatch gave up on %q, of the shape it reads", body)
		}
	})
}

// FuzzFastBatch: whatever fastBatch accepts, the general way decodes
// alike.
func FuzzFastBatch(f *testing.F) {
	f.Add(`{"project_id":"p","tasks":[{"title":"a","priority":3,"dependencies":[{"id":"b"}]}]}`)
	f.Add(`[{"title":"a","metadata":{"k":"v"},"test_commands":["x"],"requires_approval":true}]`)
	f.Add(`{"tasks":[{"title":"a","max_retries":-0,"dependencies":[{"id":"b","requires_success":false}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		sameAsGeneral(t, []byte(body))
	})
}

// batchText draws the JSON text of a batch, and whether it is of the
// shape fastBatch reads (plain): no escapes, nulls, other numbers, other
// members, repeated keys or keys in another case.
func batchText(t *rapid.T) (string, bool) {
	plain := true
	sp := func() string { return rapid.SampledFrom([]string{"", "", " ", "\n\t ", "\r\n"}).Draw(t, "space") }
	odd := func(label string) bool {
		if rapid.IntRange(0, 30).Draw(t, label) == 0 {
			plain = false
			return true
		}
		return false
	}
	str := func() string {
		if odd("escaped") {
			s, _ := json.Marshal(rapid.SampledFrom([]string{"a\nb", `q"uote`, "tab\t", "<b>", "\u2028"}).Draw(t, "special"))
			return sp() + string(s) + sp()
		}
		return sp() + `"` + rapid.StringMatching(`[a-z0-9 é✓_-]{0,10}`).Draw(t, "text") + `"` + sp()
	}
	num := func() string {
		if odd("oddnum") {
			return rapid.SampledFrom([]string{"1e2", "1.0", "null", `"3"`, "99999999999999999999"}).Draw(t, "odd number")
		}
		return sp() + strconv.Itoa(rapid.IntRange(-1000, 1000).Draw(t, "int")) + sp()
	}
	boolean := func() string {
		if odd("oddbool") {
			return rapid.SampledFrom([]string{"null", `"true"`, "1"}).Draw(t, "odd bool")
		}
		return sp() + strconv.FormatBool(rapid.Bool().Draw(t, "bool")) + sp()
	}
	list := func(elem func() string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = elem()
		}
		return sp() + "[" + sp() + strings.Join(parts, ",") + sp() + "]" + sp()
	}
	object := func(members map[string]func() string, label string) string {
		keys := slices.Sorted(maps.Keys(members))
		keys = rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, len(keys), rapid.ID[string]).Draw(t, label)
		var parts []string
		for _, k := range keys {
			key := k
			switch {
			case odd("case"):
				key = strings.ToUpper(k[:1]) + k[1:]
			case odd("unknown"):
				key = "unknown_" + k
			}
			parts = append(parts, sp()+`"`+key+`"`+sp()+":"+members[k]())
			if odd("repeat") {
				parts = append(parts, sp()+`"`+key+`"`+sp()+":"+members[k]())
			}
		}
		return sp() + "{" + strings.Join(parts, ",") + "}" + sp()
	}
	strs := func() string { return list(str, rapid.IntRange(0, 3).Draw(t, "strings")) }
	metadata := func() string {
		n := rapid.IntRange(0, 3).Draw(t, "metadata")
		keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z]{0,4}`), n, n, rapid.ID[string]).Draw(t, "metadata keys")
		var parts []string
		for _, k := range keys {
			parts = append(parts, `"`+k+`":`+str())
		}
		if n > 0 && odd("repeated metadata") {
			parts = append(parts, `"`+keys[0]+`":`+str())
		}
		return sp() + "{" + strings.Join(parts, ",") + "}" + sp()
	}
	dependency := func() string {
		return object(map[string]func() string{"id": str, "requires_success": boolean}, "dependency members")
	}
	task := func() string {
		m := map[string]func() string{
			"id": str, "project_id": str, "title": str, "name": str, "description": str, "priority": num,
			"verification_type": str, "max_retries": num, "parent_task_id": str, "repo_id": str,
			"requires_approval": boolean, "plan_source": str, "is_plan_subtask": boolean, "kind": str,
			"created_by": str, "expected_count": num, "profile": str, "agent_type": str, "metadata": metadata,
			"acceptance_criteria": strs, "test_commands": strs, "runner_labels": strs,
			"dependencies": func() string { return list(dependency, rapid.IntRange(0, 3).Draw(t, "dependencies")) },
		}
		if odd("general member") {
			m["timeout"] = func() string { return `"1m"` }
		}
		return object(m, "task members")
	}
	tasks := func() string { return list(task, rapid.IntRange(0, 4).Draw(t, "tasks")) }
	if rapid.Bool().Draw(t, "bare array") {
		return tasks(), plain
	}
	return object(map[string]func() string{"project_id": str, "created_by": str, "tasks": tasks}, "batch members"), plain
}
