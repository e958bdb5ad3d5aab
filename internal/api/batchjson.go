package api

import (
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A batch of thousands of tasks is mostly the same few members again and
// again: titles, descriptions, ids and dependencies. encoding/json decodes
// it through reflection, and the strict checks walk it once more;
// fastBatch reads the common shape of such a body in one pass, without
// reflection, and gives up on anything else — a member it does not know,
// an escape in a string, a null, a number that is not a plain integer, a
// repeated key, any malformed byte — so that DecodeBatch decodes that
// body the general way, whose answers and messages are the API's. What
// fastBatch accepts, it decodes exactly as the general way does
// (TestFastBatchDecodesAsTheGeneralWay and FuzzFastBatch hold it to that).

// fastBatch decodes data, a task batch (a models.TaskBatch object or a bare
// array of entries), when it is of the shape fastBatch reads; ok is false
// otherwise, and the batch is then to be decoded the general way.
func fastBatch(data []byte) (b models.TaskBatch, ok bool) {
	r := batchReader{data: data}
	r.space()
	switch r.peek() {
	case '[':
		b.Tasks, ok = r.tasks()
	case '{':
		ok = r.batchObject(&b)
	}
	if !ok {
		return models.TaskBatch{}, false
	}
	r.space()
	if r.pos != len(r.data) {
		return models.TaskBatch{}, false
	}
	return b, true
}

// batchReader reads a batch's JSON from data at pos. Each method returns
// false when what it finds is not what fastBatch reads.
type batchReader struct {
	data []byte
	pos  int
	// interned holds one copy of each short text of the members that
	// entries share (project ids, kinds, local ids that dependencies
	// name): a batch names its project thousands of times.
	interned map[string]string
	// deps is where the entries' dependencies are kept, each entry's a
	// part of it whose capacity ends where its dependencies do.
	deps []models.BatchDependency
}

func (r *batchReader) space() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\r', '\n':
			r.pos++
		default:
			return
		}
	}
}

// peek is the next byte, 0 at the end.
func (r *batchReader) peek() byte {
	if r.pos < len(r.data) {
		return r.data[r.pos]
	}
	return 0
}

// consume skips space, then c, reporting whether it was there.
func (r *batchReader) consume(c byte) bool {
	r.space()
	if r.peek() != c {
		return false
	}
	r.pos++
	return true
}

// rawString reads a string without escapes and of valid UTF-8, returning
// its bytes in data.
func (r *batchReader) rawString() ([]byte, bool) {
	r.space()
	if r.peek() != '"' {
		return nil, false
	}
	start := r.pos + 1
	ascii := true
	for i := start; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '"':
			s := r.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			r.pos = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string value.
func (r *batchReader) str() (string, bool) {
	s, ok := r.rawString()
	return string(s), ok
}

// shared reads a string value that many entries are likely to repeat.
func (r *batchReader) shared() (string, bool) {
	s, ok := r.rawString()
	if !ok || len(s) > 64 {
		return string(s), ok
	}
	if v, ok := r.interned[string(s)]; ok {
		return v, true
	}
	if r.interned == nil {
		r.interned = map[string]string{}
	}
	v := string(s)
	r.interned[v] = v
	return v, true
}

// integer reads an integer written plainly: an optional minus and at most
// 18 digits, without a leading zero, a fraction or an exponent.
func (r *batchReader) integer() (int, bool) {
	r.space()
	neg := r.peek() == '-'
	if neg {
		r.pos++
	}
	start := r.pos
	n := 0
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
		n = n*10 + int(r.data[r.pos]-'0')
		r.pos++
	}
	digits := r.pos - start
	if digits == 0 || digits > 18 || digits > 1 && r.data[start] == '0' {
		return 0, false
	}
	switch r.peek() {
	case '.', 'e', 'E':
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// boolean reads true or false.
func (r *batchReader) boolean() (bool, bool) {
	r.space()
	rest := r.data[r.pos:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		r.pos += 4
		return true, r.literalEnds()
	case len(rest) >= 5 && string(rest[:5]) == "false":
		r.pos += 5
		return false, r.literalEnds()
	}
	return false, false
}

// literalEnds reports whether a literal just read is not followed by more
// of a word ("truex" is malformed).
func (r *batchReader) literalEnds() bool {
	switch c := r.peek(); {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return false
	}
	return true
}

// members reads an object, calling member with each key (before its
// value, which member reads) and refusing a repeated key: seen tracks the
// keys' bits, each key being one member of a fixed set (member answers
// its bit, or 0 for a key it does not read).
func (r *batchReader) members(member func(key []byte) (bit uint64, ok bool)) bool {
	if !r.consume('{') {
		return false
	}
	if r.consume('}') {
		return true
	}
	var seen uint64
	for {
		key, ok := r.rawString()
		if !ok || !r.consume(':') {
			return false
		}
		bit, ok := member(key)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		if r.consume('}') {
			return true
		}
		if !r.consume(',') {
			return false
		}
	}
}

// elements reads an array, calling element for each element (which reads
// it); empty reports an array with none.
func (r *batchReader) elements(element func() bool) (empty, ok bool) {
	if !r.consume('[') {
		return false, false
	}
	if r.consume(']') {
		return true, true
	}
	for {
		if !element() {
			return false, false
		}
		if r.consume(']') {
			return false, true
		}
		if !r.consume(',') {
			return false, false
		}
	}
}

// batchObject reads a models.TaskBatch object into b.
func (r *batchReader) batchObject(b *models.TaskBatch) bool {
	return r.members(func(key []byte) (uint64, bool) {
		var ok bool
		switch string(key) {
		case "project_id":
			b.ProjectID, ok = r.shared()
			return 1 << 0, ok
		case "created_by":
			b.CreatedBy, ok = r.shared()
			return 1 << 1, ok
		case "tasks":
			b.Tasks, ok = r.tasks()
			return 1 << 2, ok
		}
		return 0, false
	})
}

// tasks reads the array of a batch's entries.
func (r *batchReader) tasks() ([]models.BatchTask, bool) {
	var tasks []models.BatchTask
	empty, ok := r.elements(func() bool {
		if tasks == nil {
			n := min(r.estimate(), models.MaxBatchSize)
			tasks = make([]models.BatchTask, 0, n)
			r.interned = make(map[string]string, n)
		}
		tasks = append(tasks, models.BatchTask{})
		return r.task(&tasks[len(tasks)-1])
	})
	if empty {
		// encoding/json leaves an empty array as an empty slice.
		tasks = []models.BatchTask{}
	}
	return tasks, ok
}

// estimate guesses how many entries the array at pos holds, to size the
// slice once: the number of "title" keys ahead, or at least 1.
func (r *batchReader) estimate() int {
	n := 0
	rest := r.data[r.pos:]
	for i := 0; i+8 <= len(rest); i++ {
		if rest[i] == '"' && string(rest[i:i+8]) == `"title":` {
			n++
			i += 7
		}
	}
	return max(n, 1)
}

// task reads one entry of a batch into t.
func (r *batchReader) task(t *models.BatchTask) bool {
	return r.members(func(key []byte) (uint64, bool) {
		var ok bool
		switch string(key) {
		case "id":
			t.LocalID, ok = r.shared()
			return 1 << 0, ok
		case "project_id":
			t.ProjectID, ok = r.shared()
			return 1 << 1, ok
		case "title":
			t.Title, ok = r.str()
			return 1 << 2, ok
		case "name":
			t.Name, ok = r.str()
			return 1 << 3, ok
		case "description":
			t.Description, ok = r.shared()
			return 1 << 4, ok
		case "priority":
			var n int
			n, ok = r.integer()
			t.Priority = &n
			return 1 << 5, ok
		case "verification_type":
			var s string
			s, ok = r.shared()
			t.VerificationType = models.VerificationType(s)
			return 1 << 6, ok
		case "max_retries":
			var n int
			n, ok = r.integer()
			t.MaxRetries = &n
			return 1 << 7, ok
		case "parent_task_id":
			t.ParentTaskID, ok = r.shared()
			return 1 << 8, ok
		case "repo_id":
			t.RepoID, ok = r.shared()
			return 1 << 9, ok
		case "requires_approval":
			t.RequiresApproval, ok = r.boolean()
			return 1 << 10, ok
		case "plan_source":
			t.PlanSource, ok = r.shared()
			return 1 << 11, ok
		case "is_plan_subtask":
			t.IsPlanSubtask, ok = r.boolean()
			return 1 << 12, ok
		case "kind":
			t.Kind, ok = r.shared()
			return 1 << 13, ok
		case "created_by":
			t.CreatedBy, ok = r.shared()
			return 1 << 14, ok
		case "expected_count":
			t.ExpectedCount, ok = r.integer()
			return 1 << 15, ok
		case "profile":
			t.Profile, ok = r.shared()
			return 1 << 16, ok
		case "agent_type":
			t.AgentType, ok = r.shared()
			return 1 << 17, ok
		case "metadata":
			t.Metadata, ok = r.stringMap()
			return 1 << 18, ok
		case "acceptance_criteria":
			t.AcceptanceCriteria, ok = r.strings()
			return 1 << 19, ok
		case "test_commands":
			t.TestCommands, ok = r.strings()
			return 1 << 20, ok
		case "dependencies":
			t.Dependencies, ok = r.dependencies()
			return 1 << 21, ok
		case "runner_labels":
			t.RunnerLabels, ok = r.strings()
			return 1 << 22, ok
		}
		return 0, false
	})
}

// dependencies reads an entry's array of dependencies.
func (r *batchReader) dependencies() ([]models.BatchDependency, bool) {
	start := len(r.deps)
	empty, ok := r.elements(func() bool {
		var d models.BatchDependency
		ok := r.members(func(key []byte) (uint64, bool) {
			var ok bool
			switch string(key) {
			case "id":
				d.ID, ok = r.shared()
				return 1 << 0, ok
			case "requires_success":
				var v bool
				v, ok = r.boolean()
				d.RequiresSuccess = &v
				return 1 << 1, ok
			}
			return 0, false
		})
		r.deps = append(r.deps, d)
		return ok
	})
	if empty {
		return []models.BatchDependency{}, ok
	}
	return r.deps[start:len(r.deps):len(r.deps)], ok
}

// strings reads an array of strings.
func (r *batchReader) strings() ([]string, bool) {
	var l []string
	empty, ok := r.elements(func() bool {
		s, ok := r.str()
		l = append(l, s)
		return ok
	})
	if empty {
		l = []string{}
	}
	return l, ok
}

// stringMap reads an object of strings. Its keys are free, but repeated
// keys are still refused, as the strict checks do.
func (r *batchReader) stringMap() (map[string]string, bool) {
	m := map[string]string{}
	if !r.consume('{') {
		return nil, false
	}
	if r.consume('}') {
		return m, true
	}
	for {
		key, ok := r.str()
		if !ok || !r.consume(':') {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		if m[key], ok = r.shared(); !ok {
			return nil, false
		}
		if r.consume('}') {
			return m, true
		}
		if !r.consume(',') {
			return nil, false
		}
	}
}
