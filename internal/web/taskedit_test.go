package web_test

import (
	"context"
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// limitsFields reads the "Limits and routing" form's values as a page
// shows them.
var limitsFields = []struct {
	name string
	re   *regexp.Regexp
}{
	{"kind", regexp.MustCompile(`<input id="kind" name="kind" value="([^"]*)"`)},
	{"timeout", regexp.MustCompile(`<input id="timeout" name="timeout" value="([^"]*)"`)},
	{"expected_count", regexp.MustCompile(`<input id="expected-count" name="expected_count" type="number" min="0" value="([^"]*)"`)},
	{"metadata", regexp.MustCompile(`(?s)<textarea id="metadata" name="metadata">(.*?)</textarea>`)},
}

// limitsForm returns the values of the task page's "Limits and routing"
// form, as a browser would post them unchanged.
func limitsForm(t *testing.T, body string) url.Values {
	t.Helper()
	form := url.Values{}
	for _, f := range limitsFields {
		m := f.re.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("the task's page lacks the form field %s:\n%s", f.name, body)
		}
		form.Set(f.name, html.UnescapeString(m[1]))
	}
	return form
}

// TestLimitsForm edits a task's kind, timeout, expected count and metadata
// from its page: each post changes only the fields whose values differ
// from the task's, and the page shows the new values.
func TestLimitsForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.task("web", "Build")
	// A value the key=value lines cannot hold exactly (a line break) is
	// kept by every post that leaves the metadata as the page showed it.
	meta := map[string]string{"team": "web", "note": "two\nlines"}
	if _, err := e.store.EditTask(ctx, id, models.TaskPatch{Kind: ptr("lint"), Metadata: &meta}); err != nil {
		t.Fatal(err)
	}
	csrf := e.csrf("/ui/tasks/" + id)
	before, err := e.store.GetTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change url.Values // fields set over the page's own values
		flash  string
		want   models.Task // the stored kind, timeout, expected count, metadata
		page   []string
	}{
		{"the page's values as shown", nil, "Nothing changed: the form holds the current values.",
			models.Task{Kind: "lint", Metadata: meta}, []string{`<dt>Kind</dt><dd>lint</dd>`}},
		{"the timeout alone", url.Values{"timeout": {"30m"}}, "Changed: timeout.",
			models.Task{Kind: "lint", Timeout: models.Duration(30 * time.Minute), Metadata: meta},
			[]string{`<dt>Timeout</dt><dd>30m</dd>`, `name="timeout" value="30m"`, `<dt>Kind</dt><dd>lint</dd>`}},
		{"the metadata and the expected count", url.Values{"metadata": {"team=web\r\nowner = ana\r\n\r\n"}, "expected_count": {"5"}},
			"Changed: metadata, expected_count.",
			models.Task{Kind: "lint", Timeout: models.Duration(30 * time.Minute), ExpectedCount: 5,
				Metadata: map[string]string{"team": "web", "owner": "ana"}},
			[]string{`<dt>Expected count</dt><dd>5</dd>`, `name="metadata">owner=ana` + "\n" + `team=web` + "\n</textarea>"}},
		{"the same metadata in another order", url.Values{"metadata": {"team=web\nowner=ana"}},
			"Nothing changed: the form holds the current values.",
			models.Task{Kind: "lint", Timeout: models.Duration(30 * time.Minute), ExpectedCount: 5,
				Metadata: map[string]string{"team": "web", "owner": "ana"}}, nil},
		{"a timeout in hours", url.Values{"timeout": {"90m"}}, "Changed: timeout.",
			models.Task{Kind: "lint", Timeout: models.Duration(90 * time.Minute), ExpectedCount: 5,
				Metadata: map[string]string{"team": "web", "owner": "ana"}},
			[]string{`<dt>Timeout</dt><dd>1h30m</dd>`}},
		{"everything cleared", url.Values{"kind": {""}, "timeout": {""}, "expected_count": {"0"}, "metadata": {""}},
			"Changed: kind, metadata, expected_count, timeout.", models.Task{},
			[]string{`name="kind" value=""`, `name="timeout" value=""`, `min="0" value=""`, `name="metadata"></textarea>`}},
	}
	for _, tc := range tests {
		form := limitsForm(t, e.get("/ui/tasks/"+id).body)
		for k, v := range tc.change {
			form[k] = v
		}
		form.Set("csrf", csrf)
		p := e.post("/ui/tasks/"+id+"/limits", form)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/tasks/"+id {
			t.Fatalf("%s: %d to %q\n%s", tc.name, p.status, p.header.Get("Location"), p.body)
		}
		got, err := e.store.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != tc.want.Kind || got.Timeout != tc.want.Timeout || got.ExpectedCount != tc.want.ExpectedCount ||
			!maps.Equal(got.Metadata, tc.want.Metadata) {
			t.Fatalf("%s: stored kind %q, timeout %s, expected_count %d, metadata %q; want %q, %s, %d, %q", tc.name,
				got.Kind, got.Timeout, got.ExpectedCount, got.Metadata,
				tc.want.Kind, tc.want.Timeout, tc.want.ExpectedCount, tc.want.Metadata)
		}
		if got.Priority != before.Priority || got.AgentType != before.AgentType || got.Title != before.Title {
			t.Errorf("%s: a field outside the form changed: %+v", tc.name, got)
		}
		next := e.get(p.header.Get("Location"))
		for _, want := range append([]string{tc.flash}, tc.page...) {
			if !strings.Contains(next.body, want) {
				t.Errorf("%s: the page lacks %q:\n%s", tc.name, want, next.body)
			}
		}
	}
}

// TestLimitsFormOnlyWhileEditable: the form is shown only while the
// task's status allows an edit, and a post for a task that finished
// since its page was read shows the refusal's reason.
func TestLimitsFormOnlyWhileEditable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.task("web", "Build")
	p := e.get("/ui/tasks/" + id)
	if !strings.Contains(p.body, `<form class="stack" id="limits"`) || !strings.Contains(p.body, "Limits and routing") {
		t.Fatalf("the READY task's page lacks the form:\n%s", p.body)
	}
	csrf := e.csrf("/ui/tasks/" + id)
	for _, ev := range []models.TaskEvent{models.EventAdminCancel, models.EventAdminSkip} {
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	post := e.post("/ui/tasks/"+id+"/limits", url.Values{"timeout": {"30m"}, "csrf": {csrf}})
	if post.status != http.StatusSeeOther {
		t.Fatalf("post: %d\n%s", post.status, post.body)
	}
	next := e.get(post.header.Get("Location"))
	if !strings.Contains(next.body, `class="flash error"`) || !strings.Contains(next.body, "a finished task cannot be edited") {
		t.Errorf("the page lacks the refusal:\n%s", next.body)
	}
	if strings.Contains(next.body, `id="limits"`) {
		t.Errorf("the COMPLETED task's page shows the form:\n%s", next.body)
	}
	if got, err := e.store.GetTask(ctx, id); err != nil || got.Timeout != 0 {
		t.Errorf("the COMPLETED task's timeout is %s (%v)", got.Timeout, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestLimitsFormKeepsOthersEdits: a form posted from a page read before
// someone else changed the task changes only what its person changed; the
// other fields keep the newer values.
func TestLimitsFormKeepsOthersEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.task("web", "Build")
	page := e.get("/ui/tasks/" + id)
	form := limitsForm(t, page.body)
	for _, name := range []string{"kind", "timeout", "expected_count", "metadata"} {
		m := regexp.MustCompile(`<input type="hidden" name="shown_` + name + `" value="([^"]*)"`).FindStringSubmatch(page.body)
		if m == nil {
			t.Fatalf("the form does not say what it showed of %s:\n%s", name, page.body)
		}
		form.Set("shown_"+name, html.UnescapeString(m[1]))
	}
	// Meanwhile, from ctl: a timeout and metadata.
	meta := map[string]string{"owner": "ana"}
	hour := models.Duration(time.Hour)
	if _, err := e.store.EditTask(ctx, id, models.TaskPatch{Timeout: &hour, Metadata: &meta}); err != nil {
		t.Fatal(err)
	}
	form.Set("kind", "lint")
	form.Set("csrf", e.csrf("/ui/tasks/"+id))
	if post := e.post("/ui/tasks/"+id+"/limits", form); post.status != http.StatusSeeOther {
		t.Fatalf("post: %d\n%s", post.status, post.body)
	}
	got, err := e.store.GetTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "lint" || got.Timeout != hour || !maps.Equal(got.Metadata, meta) {
		t.Errorf("kind %q, timeout %s, metadata %v; want lint, the other edit's 1h and %v", got.Kind, got.Timeout, got.Metadata, meta)
	}
}
