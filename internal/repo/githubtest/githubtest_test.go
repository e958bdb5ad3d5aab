package githubtest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const token = "ghs_FAKE0123456789abcdef"

// newClock returns a settable clock that starts at the real time, so
// go-github's own rate-limit bookkeeping (which uses time.Now) agrees
// with it.
func newClock() *clocktest.Fake { return clocktest.New(time.Now().Truncate(time.Second)) }

type fixture struct {
	t     *testing.T
	srv   *githubtest.Server
	gh    *github.Client
	clock *clocktest.Fake
	clone string // clone URL of acme/widgets
	work  string // a clone of it, authenticated
	home  string
}

func newClient(t *testing.T, srv *githubtest.Server, tok string) *github.Client {
	t.Helper()
	gh, err := github.NewClient(nil).WithAuthToken(tok).WithEnterpriseURLs(srv.URL()+"/api/v3/", srv.URL()+"/api/uploads/")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gh.BaseURL.String(), srv.URL()+"/api/v3/"; got != want {
		t.Fatalf("BaseURL %s, want %s", got, want)
	}
	return gh
}

func setup(t *testing.T, opts githubtest.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: newClock(), home: t.TempDir()}
	opts.Token = token
	opts.Logf = t.Logf
	if opts.Clock == nil {
		opts.Clock = f.clock
	}
	f.srv = githubtest.New(opts)
	t.Cleanup(f.srv.Close)
	f.gh = newClient(t, f.srv, token)
	f.clone = f.srv.CreateRepo("acme", "widgets", "main")
	return f
}

// gitEnv is a scrubbed environment for the test's own git commands; auth,
// when true, adds the token through environment-only configuration.
func (f *fixture) gitEnv(auth bool, tok string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "XDG_CONFIG_HOME=" + f.home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com",
		"GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com",
	}
	if auth {
		basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic)
	}
	return env
}

func (f *fixture) gitTry(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.gitTry(dir, f.gitEnv(true, token), args...)
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// commitOn makes a commit on branch (created from main when new) in the
// work clone and pushes it; it returns the commit.
func (f *fixture) commitOn(branch, file, content string) string {
	f.t.Helper()
	if f.work == "" {
		f.work = filepath.Join(f.t.TempDir(), "work")
		f.git("", "clone", "--quiet", f.clone, f.work)
	}
	if _, err := f.gitTry(f.work, f.gitEnv(false, ""), "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		f.git(f.work, "checkout", "--quiet", "-b", branch, "origin/main")
	} else {
		f.git(f.work, "checkout", "--quiet", branch)
	}
	if err := os.WriteFile(filepath.Join(f.work, file), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.git(f.work, "add", file)
	f.git(f.work, "commit", "--quiet", "-m", "change "+file)
	f.git(f.work, "push", "--quiet", "origin", branch)
	return f.git(f.work, "rev-parse", "HEAD")
}

// bareRef reads a ref of the server's bare repository.
func (f *fixture) bareRef(ref string) (string, bool) {
	out, err := f.gitTry(f.srv.RepoDir("acme", "widgets"), f.gitEnv(false, ""), "rev-parse", "--verify", "--quiet", ref)
	return out, err == nil
}

func (f *fixture) createPR(branch string) *github.PullRequest {
	f.t.Helper()
	pr, resp, err := f.gh.PullRequests.Create(context.Background(), "acme", "widgets", &github.NewPullRequest{
		Title: github.String("Task " + branch), Head: github.String("acme:" + branch),
		Base: github.String("main"), Body: github.String("Body of " + branch),
		MaintainerCanModify: github.Bool(true),
	})
	if err != nil {
		f.t.Fatalf("create PR: %v", err)
	}
	if resp.StatusCode != http.StatusCreated {
		f.t.Fatalf("create PR status %d", resp.StatusCode)
	}
	return pr
}

func asErrorResponse(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("error %v (%T) is not *github.ErrorResponse", err, err)
	}
	if er.Response.StatusCode != status {
		t.Fatalf("status %d, want %d (%v)", er.Response.StatusCode, status, err)
	}
	return er
}

func TestPullRequestLifecycle(t *testing.T) {
	f := setup(t, githubtest.Options{})
	ctx := context.Background()
	mainSHA, _ := f.bareRef("refs/heads/main")
	head := f.commitOn("task-1", "a.txt", "a\n")

	pr := f.createPR("task-1")
	if pr.GetNumber() != 1 || pr.GetState() != "open" || pr.GetMerged() || pr.Merged == nil || pr.GetDraft() {
		t.Fatalf("created %v", pr)
	}
	if got, want := pr.GetHTMLURL(), f.srv.URL()+"/acme/widgets/pull/1"; got != want {
		t.Errorf("html_url %s, want %s", got, want)
	}
	if got, want := pr.GetURL(), f.srv.URL()+"/api/v3/repos/acme/widgets/pulls/1"; got != want {
		t.Errorf("url %s, want %s", got, want)
	}
	if pr.GetHead().GetRef() != "task-1" || pr.GetHead().GetSHA() != head || pr.GetHead().GetLabel() != "acme:task-1" ||
		pr.GetHead().GetRepo().GetFullName() != "acme/widgets" {
		t.Errorf("head %v", pr.GetHead())
	}
	if pr.GetBase().GetRef() != "main" || pr.GetBase().GetSHA() != mainSHA {
		t.Errorf("base %v", pr.GetBase())
	}
	if pr.GetID() == 0 || pr.GetNodeID() == "" || pr.GetUser().GetLogin() != "octocat" || pr.GetBody() != "Body of task-1" ||
		!pr.GetMergeable() || pr.GetCommits() != 1 || pr.GetAdditions() != 1 || pr.GetChangedFiles() != 1 {
		t.Errorf("created %v", pr)
	}

	got, _, err := f.gh.PullRequests.Get(ctx, "acme", "widgets", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetID() != pr.GetID() || got.GetHead().GetSHA() != head || got.GetState() != "open" {
		t.Fatalf("get %v", got)
	}

	// The same head again: 422 with GitHub's message.
	_, _, err = f.gh.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("again"), Head: github.String("acme:task-1"), Base: github.String("main")})
	er := asErrorResponse(t, err, http.StatusUnprocessableEntity)
	if er.Message != "Validation Failed" || len(er.Errors) != 1 ||
		er.Errors[0].Message != "A pull request already exists for acme:task-1." || er.Errors[0].Code != "custom" {
		t.Fatalf("duplicate: %+v", er)
	}
	// A branch without commits beyond main.
	f.git(f.work, "push", "--quiet", "origin", "origin/main:refs/heads/empty")
	_, _, err = f.gh.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("empty"), Head: github.String("empty"), Base: github.String("main")})
	er = asErrorResponse(t, err, http.StatusUnprocessableEntity)
	if len(er.Errors) != 1 || er.Errors[0].Message != "No commits between main and empty" {
		t.Fatalf("no commits: %+v", er)
	}
	// A branch that does not exist.
	_, _, err = f.gh.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("missing"), Head: github.String("acme:nope"), Base: github.String("main")})
	er = asErrorResponse(t, err, http.StatusUnprocessableEntity)
	if len(er.Errors) != 1 || er.Errors[0].Field != "head" || er.Errors[0].Code != "invalid" {
		t.Fatalf("missing head: %+v", er)
	}

	// List by head.
	list, _, err := f.gh.PullRequests.List(ctx, "acme", "widgets", &github.PullRequestListOptions{State: "open", Head: "acme:task-1"})
	if err != nil || len(list) != 1 || list[0].GetNumber() != 1 {
		t.Fatalf("list by head: %v %v", list, err)
	}
	if list[0].Merged != nil || list[0].Mergeable != nil {
		t.Errorf("list items are pull-request-simple, without merged/mergeable: %v", list[0])
	}
	list, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", &github.PullRequestListOptions{State: "all", Head: "acme:other"})
	if err != nil || len(list) != 0 {
		t.Fatalf("list by other head: %v %v", list, err)
	}

	// Reviewers and labels.
	_, _, err = f.gh.PullRequests.RequestReviewers(ctx, "acme", "widgets", 1, github.ReviewersRequest{Reviewers: []string{"octocat"}})
	er = asErrorResponse(t, err, http.StatusUnprocessableEntity)
	if er.Message != "Review cannot be requested from pull request author." {
		t.Fatalf("author as reviewer: %+v", er)
	}
	rpr, resp, err := f.gh.PullRequests.RequestReviewers(ctx, "acme", "widgets", 1, github.ReviewersRequest{Reviewers: []string{"alice", "bob"}})
	if err != nil || resp.StatusCode != http.StatusCreated || len(rpr.RequestedReviewers) != 2 || rpr.RequestedReviewers[0].GetLogin() != "alice" {
		t.Fatalf("request reviewers: %v %v", rpr, err)
	}
	labels, resp, err := f.gh.Issues.AddLabelsToIssue(ctx, "acme", "widgets", 1, []string{"agent", "needs-review"})
	if err != nil || resp.StatusCode != http.StatusOK || len(labels) != 2 || labels[1].GetName() != "needs-review" || labels[0].GetID() == 0 {
		t.Fatalf("labels: %v %v", labels, err)
	}

	// Reviews.
	f.clock.Advance(time.Minute)
	rv := f.srv.AddReview("acme", "widgets", 1, "alice", "CHANGES_REQUESTED", "please fix")
	f.clock.Advance(time.Minute)
	f.srv.AddReview("acme", "widgets", 1, "bob", "APPROVED", "")
	reviews, _, err := f.gh.PullRequests.ListReviews(ctx, "acme", "widgets", 1, nil)
	if err != nil || len(reviews) != 2 {
		t.Fatalf("reviews: %v %v", reviews, err)
	}
	if reviews[0].GetID() != rv.GetID() || reviews[0].GetState() != "CHANGES_REQUESTED" || reviews[0].GetUser().GetLogin() != "alice" ||
		reviews[0].GetBody() != "please fix" || reviews[0].GetCommitID() != head || reviews[1].GetState() != "APPROVED" {
		t.Fatalf("reviews: %v", reviews)
	}
	got, _, _ = f.gh.PullRequests.Get(ctx, "acme", "widgets", 1)
	if len(got.RequestedReviewers) != 0 || len(got.Labels) != 2 {
		t.Fatalf("after reviews: requested %v labels %v", got.RequestedReviewers, got.Labels)
	}

	// Merge.
	merged, resp, err := f.gh.PullRequests.IsMerged(ctx, "acme", "widgets", 1)
	if err != nil || merged || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("IsMerged before: %v %v", merged, err)
	}
	_, _, err = f.gh.PullRequests.Merge(ctx, "acme", "widgets", 1, "", &github.PullRequestOptions{MergeMethod: "merge", SHA: mainSHA})
	asErrorResponse(t, err, http.StatusConflict)
	res, _, err := f.gh.PullRequests.Merge(ctx, "acme", "widgets", 1, "", &github.PullRequestOptions{MergeMethod: "merge", SHA: head})
	if err != nil || !res.GetMerged() || res.GetSHA() == "" {
		t.Fatalf("merge: %v %v", res, err)
	}
	if newMain, _ := f.bareRef("refs/heads/main"); newMain != res.GetSHA() {
		t.Fatalf("main is %s, merge commit %s", newMain, res.GetSHA())
	}
	if parents, _ := f.gitTry(f.srv.RepoDir("acme", "widgets"), f.gitEnv(false, ""), "rev-list", "--parents", "-n1", res.GetSHA()); parents != res.GetSHA()+" "+mainSHA+" "+head {
		t.Fatalf("merge commit parents: %s", parents)
	}
	merged, resp, err = f.gh.PullRequests.IsMerged(ctx, "acme", "widgets", 1)
	if err != nil || !merged || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("IsMerged after: %v %v", merged, err)
	}
	got, _, _ = f.gh.PullRequests.Get(ctx, "acme", "widgets", 1)
	if !got.GetMerged() || got.GetState() != "closed" || got.MergedAt == nil || got.ClosedAt == nil ||
		got.GetMergeCommitSHA() != res.GetSHA() || got.GetMergedBy().GetLogin() != "octocat" {
		t.Fatalf("after merge: %v", got)
	}
	_, _, err = f.gh.PullRequests.Merge(ctx, "acme", "widgets", 1, "", nil)
	asErrorResponse(t, err, http.StatusMethodNotAllowed)

	// Delete the branch.
	resp, err = f.gh.Git.DeleteRef(ctx, "acme", "widgets", "heads/task-1")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete ref: %v", err)
	}
	if _, ok := f.bareRef("refs/heads/task-1"); ok {
		t.Fatal("task-1 still in the bare repository")
	}
	if d := f.srv.DeletedBranches("acme", "widgets"); len(d) != 1 || d[0] != "task-1" {
		t.Fatalf("deleted branches %v", d)
	}
	_, err = f.gh.Git.DeleteRef(ctx, "acme", "widgets", "refs/heads/task-1")
	er = asErrorResponse(t, err, http.StatusUnprocessableEntity)
	if er.Message != "Reference does not exist" {
		t.Fatalf("delete again: %+v", er)
	}
	if prs := f.srv.PRs("acme", "widgets"); len(prs) != 1 || !prs[0].GetMerged() {
		t.Fatalf("PRs %v", prs)
	}
}

func TestTestSideControls(t *testing.T) {
	f := setup(t, githubtest.Options{})
	ctx := context.Background()
	f.commitOn("a", "a.txt", "a\n")
	f.commitOn("b", "b.txt", "b\n")
	f.commitOn("c", "c.txt", "c\n")
	f.createPR("a")
	f.createPR("b")
	f.createPR("c")

	mainBefore, _ := f.bareRef("refs/heads/main")
	if err := f.srv.MergePR("acme", "widgets", 1); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.ClosePR("acme", "widgets", 2); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.MergePR("acme", "widgets", 2); err == nil {
		t.Fatal("merging a closed pull request succeeded")
	}
	prs := f.srv.PRs("acme", "widgets")
	if !prs[0].GetMerged() || prs[0].GetState() != "closed" || prs[0].GetMergedBy().GetLogin() != "acme" {
		t.Fatalf("#1 %v", prs[0])
	}
	mainAfter, _ := f.bareRef("refs/heads/main")
	if mainAfter == mainBefore || prs[0].GetMergeCommitSHA() != mainAfter {
		t.Fatalf("main %s → %s, merge commit %s", mainBefore, mainAfter, prs[0].GetMergeCommitSHA())
	}
	if prs[1].GetMerged() || prs[1].GetState() != "closed" || prs[1].ClosedAt == nil {
		t.Fatalf("#2 %v", prs[1])
	}

	// A push to the head of an open pull request moves it.
	f.clock.Advance(time.Minute)
	newHead := f.commitOn("c", "c2.txt", "more\n")
	got, _, err := f.gh.PullRequests.Get(ctx, "acme", "widgets", 3)
	if err != nil || got.GetHead().GetSHA() != newHead || !got.GetUpdatedAt().Time.Equal(f.clock.Now()) || got.GetCommits() != 2 {
		t.Fatalf("after push: %v %v", got, err)
	}
	// Deleting its head branch closes it, as on GitHub.
	f.git(f.work, "push", "--quiet", "origin", "--delete", "c")
	got, _, _ = f.gh.PullRequests.Get(ctx, "acme", "widgets", 3)
	if got.GetState() != "closed" || got.GetMerged() {
		t.Fatalf("after deleting its branch: %v", got)
	}

	// Pagination: newest first, 2 a page, Link headers.
	all := &github.PullRequestListOptions{State: "all", ListOptions: github.ListOptions{PerPage: 2}}
	page1, resp, err := f.gh.PullRequests.List(ctx, "acme", "widgets", all)
	if err != nil || len(page1) != 2 || page1[0].GetNumber() != 3 || resp.NextPage != 2 || resp.LastPage != 2 {
		t.Fatalf("page 1: %v next %d last %d %v", page1, resp.NextPage, resp.LastPage, err)
	}
	all.Page = resp.NextPage
	page2, resp, err := f.gh.PullRequests.List(ctx, "acme", "widgets", all)
	if err != nil || len(page2) != 1 || page2[0].GetNumber() != 1 || resp.NextPage != 0 || resp.PrevPage != 1 || resp.FirstPage != 1 {
		t.Fatalf("page 2: %v %v", page2, err)
	}
	open, _, err := f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
	if err != nil || len(open) != 0 {
		t.Fatalf("open: %v %v", open, err)
	}
}

func TestMergeMethodsAndConflicts(t *testing.T) {
	f := setup(t, githubtest.Options{})
	ctx := context.Background()
	f.commitOn("x", "same.txt", "x\n")
	f.commitOn("y", "same.txt", "y\n")
	f.createPR("x")
	f.createPR("y")
	mainBefore, _ := f.bareRef("refs/heads/main")
	res, _, err := f.gh.PullRequests.Merge(ctx, "acme", "widgets", 1, "", &github.PullRequestOptions{MergeMethod: "squash"})
	if err != nil {
		t.Fatal(err)
	}
	if parents, _ := f.gitTry(f.srv.RepoDir("acme", "widgets"), f.gitEnv(false, ""), "rev-list", "--parents", "-n1", "main"); parents != res.GetSHA()+" "+mainBefore {
		t.Fatalf("squash commit parents %q", parents)
	}
	y, _, err := f.gh.PullRequests.Get(ctx, "acme", "widgets", 2)
	if err != nil || y.Mergeable == nil || y.GetMergeable() || y.GetMergeableState() != "dirty" {
		t.Fatalf("conflicting PR: mergeable %v %q %v", y.Mergeable, y.GetMergeableState(), err)
	}
	_, _, err = f.gh.PullRequests.Merge(ctx, "acme", "widgets", 2, "", nil)
	if er := asErrorResponse(t, err, http.StatusMethodNotAllowed); er.Message != "Pull Request is not mergeable" {
		t.Fatalf("%+v", er)
	}
	if err := f.srv.MergePR("acme", "widgets", 2); err == nil {
		t.Fatal("MergePR of a conflicting PR succeeded")
	}
}

func TestConditionalRequests(t *testing.T) {
	f := setup(t, githubtest.Options{})
	ctx := context.Background()
	f.commitOn("task", "a.txt", "a\n")
	f.createPR("task")

	get := func(path, etag string, v any) (*github.Response, error) {
		req, err := f.gh.NewRequest(http.MethodGet, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		return f.gh.Do(ctx, req, v)
	}
	var pr github.PullRequest
	resp, err := get("repos/acme/widgets/pulls/1", "", &pr)
	if err != nil {
		t.Fatal(err)
	}
	etag := resp.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || pr.GetNumber() != 1 {
		t.Fatalf("etag %q pr %v", etag, pr)
	}
	remaining := resp.Rate.Remaining

	// A matching If-None-Match: 304, which go-github v60 returns as an
	// *ErrorResponse (and resp.StatusCode 304), with nothing decoded.
	var again github.PullRequest
	resp, err = get("repos/acme/widgets/pulls/1", etag, &again)
	er := asErrorResponse(t, err, http.StatusNotModified)
	if er.Message != "" || resp == nil || resp.StatusCode != http.StatusNotModified || again.Number != nil {
		t.Fatalf("304: %+v %v", er, again)
	}
	if resp.Rate.Remaining != remaining || resp.Header.Get("ETag") != etag {
		t.Fatalf("304 rate remaining %d, want %d unchanged", resp.Rate.Remaining, remaining)
	}
	// A weak form of the same tag matches too.
	if _, err = get("repos/acme/widgets/pulls/1", "W/"+etag, nil); err == nil {
		t.Fatal("weak etag did not match")
	}

	// If-Modified-Since with the Last-Modified of the answer.
	ims, _ := f.gh.NewRequest(http.MethodGet, "repos/acme/widgets/pulls/1", nil)
	ims.Header.Set("If-Modified-Since", resp.Header.Get("Last-Modified"))
	_, err = f.gh.Do(ctx, ims, nil)
	asErrorResponse(t, err, http.StatusNotModified)

	// A change gives a new body and tag.
	f.clock.Advance(time.Minute)
	f.srv.AddReview("acme", "widgets", 1, "alice", "APPROVED", "ok")
	resp, err = get("repos/acme/widgets/pulls/1", etag, &again)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etag || again.GetNumber() != 1 {
		t.Fatalf("after change: %v %v", resp, err)
	}
	if resp.Rate.Remaining != remaining-1 {
		t.Fatalf("a 200 costs one: remaining %d, want %d", resp.Rate.Remaining, remaining-1)
	}

	// The reviews list has its own tag.
	var reviews []*github.PullRequestReview
	resp, err = get("repos/acme/widgets/pulls/1/reviews?per_page=100", "", &reviews)
	if err != nil || len(reviews) != 1 {
		t.Fatalf("reviews %v %v", reviews, err)
	}
	rtag := resp.Header.Get("ETag")
	_, err = get("repos/acme/widgets/pulls/1/reviews?per_page=100", rtag, &reviews)
	asErrorResponse(t, err, http.StatusNotModified)

	total, notModified := f.srv.Counts()
	if notModified != 4 {
		t.Fatalf("counts %d %d", total, notModified)
	}
	var conditional int
	for _, r := range f.srv.Requests() {
		if r.Conditional {
			conditional++
		}
	}
	if conditional != 5 {
		t.Fatalf("%d conditional requests recorded, want 5", conditional)
	}
}

func TestRateLimits(t *testing.T) {
	ctx := context.Background()

	t.Run("primary", func(t *testing.T) {
		f := setup(t, githubtest.Options{})
		f.srv.RateLimitNext(1, "primary", time.Hour)
		_, _, err := f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		var rl *github.RateLimitError
		if !errors.As(err, &rl) {
			t.Fatalf("%v (%T) is not *github.RateLimitError", err, err)
		}
		if want := f.clock.Now().Add(time.Hour); !rl.Rate.Reset.Time.Equal(want) || rl.Rate.Remaining != 0 || rl.Response.StatusCode != http.StatusForbidden {
			t.Fatalf("reset %v want %v, rate %+v", rl.Rate.Reset, want, rl.Rate)
		}
		if !strings.HasPrefix(rl.Message, "API rate limit exceeded for user ID") {
			t.Fatalf("message %q", rl.Message)
		}
		// go-github now refuses locally until the reset, without a request.
		before, _ := f.srv.Counts()
		_, _, err = f.gh.PullRequests.Get(ctx, "acme", "widgets", 1)
		if !errors.As(err, &rl) || !strings.Contains(rl.Message, "not making remote request") {
			t.Fatalf("second call: %v", err)
		}
		if after, _ := f.srv.Counts(); after != before {
			t.Fatalf("a request reached the server (%d → %d)", before, after)
		}
		// RateLimits.Get bypasses that check and refreshes the client's view.
		limits, _, err := f.gh.RateLimit.Get(ctx)
		if err != nil || limits.GetCore().Remaining != 5000 {
			t.Fatalf("rate_limit: %v %v", limits, err)
		}
		if _, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil); err != nil {
			t.Fatalf("after refresh: %v", err)
		}
	})

	t.Run("primary reset is checked against the real clock", func(t *testing.T) {
		past := time.Now().Add(-2 * time.Hour)
		f := setup(t, githubtest.Options{Clock: clocktest.New(past)})
		f.srv.RateLimitNext(1, "primary", time.Hour)
		_, _, err := f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		var rl *github.RateLimitError
		if !errors.As(err, &rl) {
			t.Fatalf("%v", err)
		}
		// The reset is an hour in the real past: go-github asks again.
		if _, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil); err != nil {
			t.Fatalf("second call: %v", err)
		}
		if total, _ := f.srv.Counts(); total != 2 {
			t.Fatalf("%d requests reached the server, want 2", total)
		}
	})

	t.Run("secondary", func(t *testing.T) {
		f := setup(t, githubtest.Options{})
		f.srv.RateLimitNext(1, "secondary", 90*time.Second)
		_, _, err := f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		var ab *github.AbuseRateLimitError
		if !errors.As(err, &ab) {
			t.Fatalf("%v (%T) is not *github.AbuseRateLimitError", err, err)
		}
		if ab.RetryAfter == nil || *ab.RetryAfter != 90*time.Second || ab.Response.StatusCode != http.StatusForbidden ||
			!strings.HasPrefix(ab.Message, "You have exceeded a secondary rate limit") {
			t.Fatalf("%+v", ab)
		}
		var rl *github.RateLimitError
		if errors.As(err, &rl) {
			t.Fatal("a secondary limit is also a RateLimitError")
		}
		// go-github refuses locally for RetryAfter.
		before, _ := f.srv.Counts()
		_, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		if !errors.As(err, &ab) || !strings.Contains(ab.Message, "not making remote request") {
			t.Fatalf("second call: %v", err)
		}
		if after, _ := f.srv.Counts(); after != before {
			t.Fatal("a request reached the server")
		}
	})

	t.Run("429", func(t *testing.T) {
		f := setup(t, githubtest.Options{})
		f.srv.RateLimitNext(1, "429", 30*time.Second)
		_, resp, err := f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		er := asErrorResponse(t, err, http.StatusTooManyRequests)
		var rl *github.RateLimitError
		var ab *github.AbuseRateLimitError
		if errors.As(err, &rl) || errors.As(err, &ab) {
			t.Fatalf("429 surfaced as a rate-limit type: %T", err)
		}
		if er.Response.Header.Get("Retry-After") != "30" || resp.Header.Get("Retry-After") != "30" {
			t.Fatalf("Retry-After %q", er.Response.Header.Get("Retry-After"))
		}
		// No client-side refusal after a 429.
		if _, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("exhausted, and 304s are free", func(t *testing.T) {
		f := setup(t, githubtest.Options{RateLimit: 3})
		req, _ := f.gh.NewRequest(http.MethodGet, "repos/acme/widgets", nil)
		resp, err := f.gh.Do(ctx, req, nil)
		if err != nil || resp.Rate.Remaining != 2 || resp.Rate.Limit != 3 || resp.Header.Get("X-RateLimit-Used") != "1" ||
			resp.Header.Get("X-RateLimit-Resource") != "core" || resp.Header.Get("X-GitHub-Request-Id") == "" {
			t.Fatalf("%v %v", resp, err)
		}
		etag := resp.Header.Get("ETag")
		for range 5 {
			req, _ := f.gh.NewRequest(http.MethodGet, "repos/acme/widgets", nil)
			req.Header.Set("If-None-Match", etag)
			resp, err = f.gh.Do(ctx, req, nil)
			asErrorResponse(t, err, http.StatusNotModified)
			if resp.Rate.Remaining != 2 {
				t.Fatalf("304 remaining %d", resp.Rate.Remaining)
			}
		}
		for want := 1; want >= 0; want-- {
			_, resp, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
			if err != nil || resp.Rate.Remaining != want {
				t.Fatalf("remaining %d want %d (%v)", resp.Rate.Remaining, want, err)
			}
		}
		// Remaining 0: this client refuses locally…
		before, _ := f.srv.Counts()
		_, _, err = f.gh.PullRequests.List(ctx, "acme", "widgets", nil)
		var rl *github.RateLimitError
		if !errors.As(err, &rl) || !strings.Contains(rl.Message, "not making remote request") {
			t.Fatalf("%v", err)
		}
		if after, _ := f.srv.Counts(); after != before {
			t.Fatal("a request reached the server")
		}
		// …and a fresh one gets the server's 403 with the window's reset.
		_, _, err = newClient(t, f.srv, token).PullRequests.List(ctx, "acme", "widgets", nil)
		if !errors.As(err, &rl) || rl.Response.StatusCode != http.StatusForbidden || rl.Rate.Remaining != 0 ||
			!rl.Rate.Reset.Time.Equal(f.clock.Now().Add(time.Hour)) {
			t.Fatalf("%v", err)
		}
		// A new window after the reset.
		f.clock.Advance(time.Hour)
		_, resp, err = newClient(t, f.srv, token).PullRequests.List(ctx, "acme", "widgets", nil)
		if err != nil || resp.Rate.Remaining != 2 {
			t.Fatalf("new window: %v", err)
		}
	})

	t.Run("bad credentials and unknown routes", func(t *testing.T) {
		f := setup(t, githubtest.Options{})
		_, _, err := newClient(t, f.srv, "wrong").PullRequests.List(ctx, "acme", "widgets", nil)
		if er := asErrorResponse(t, err, http.StatusUnauthorized); er.Message != "Bad credentials" {
			t.Fatalf("%+v", er)
		}
		_, _, err = f.gh.PullRequests.List(ctx, "acme", "nothing", nil)
		if er := asErrorResponse(t, err, http.StatusNotFound); er.Message != "Not Found" || er.DocumentationURL == "" {
			t.Fatalf("%+v", er)
		}
		_, _, err = f.gh.Issues.ListComments(ctx, "acme", "widgets", 1, nil)
		asErrorResponse(t, err, http.StatusNotFound)
	})
}

func TestGitOverHTTP(t *testing.T) {
	f := setup(t, githubtest.Options{})
	head := f.commitOn("task", "a.txt", "a\n") // clone and push with the token
	if got, _ := f.bareRef("refs/heads/task"); got != head {
		t.Fatalf("pushed %s, bare repository has %q", head, got)
	}

	f.git(f.work, "commit", "--quiet", "--allow-empty", "-m", "more")
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"without credentials", f.gitEnv(false, "")},
		{"with a wrong token", f.gitEnv(true, "wrong")},
	} {
		out, err := f.gitTry(f.work, tc.env, "push", "origin", "task")
		if err == nil {
			t.Fatalf("push %s succeeded", tc.name)
		}
		if !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
			t.Fatalf("push %s: %s", tc.name, out)
		}
	}
	if got, _ := f.bareRef("refs/heads/task"); got != head {
		t.Fatal("a refused push moved the branch")
	}

	// A credential helper: git is refused (401 with WWW-Authenticate) and
	// answers the challenge with Basic x-access-token:<token>.
	before := len(f.srv.GitRequests())
	helper := f.gitEnv(false, "")
	helper = append(helper, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper",
		"GIT_CONFIG_VALUE_0=!f() { echo username=x-access-token; echo password="+token+"; }; f")
	if out, err := f.gitTry(f.work, helper, "push", "--quiet", "origin", "task"); err != nil {
		t.Fatalf("push with a credential helper: %v\n%s", err, out)
	}
	reqs := f.srv.GitRequests()[before:]
	if len(reqs) < 3 || reqs[0].Status != http.StatusUnauthorized || reqs[0].Authorization || !reqs[len(reqs)-1].Authorized {
		t.Fatalf("challenge flow: %+v", reqs)
	}

	var refusedBare, refusedWrong, pushes int
	for _, r := range f.srv.GitRequests() {
		switch {
		case r.Status == http.StatusUnauthorized && !r.Authorization:
			refusedBare++
		case r.Status == http.StatusUnauthorized && r.Authorization && !r.Authorized:
			refusedWrong++
		case r.Authorized && r.Service == "git-receive-pack" && r.Method == http.MethodPost && r.Status == http.StatusOK:
			pushes++
		}
	}
	if refusedBare < 2 || refusedWrong == 0 || pushes != 2 {
		t.Fatalf("git requests: %d refused without credentials, %d with wrong ones, %d pushes: %+v",
			refusedBare, refusedWrong, pushes, f.srv.GitRequests())
	}
}

func TestWebhookDeliver(t *testing.T) {
	f := setup(t, githubtest.Options{})
	f.commitOn("task", "a.txt", "a\n")
	f.createPR("task")
	if err := f.srv.MergePR("acme", "widgets", 1); err != nil {
		t.Fatal(err)
	}
	pr := f.srv.PRs("acme", "widgets")[0]

	const secret = "s3cret"
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 2)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	resp, err := f.srv.Deliver(context.Background(), recv.URL+"/hook", secret, "pull_request", githubtest.PullRequestEvent("closed", pr))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	d := <-got
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(d.body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); d.header.Get("X-Hub-Signature-256") != want {
		t.Fatalf("signature %q, want %q", d.header.Get("X-Hub-Signature-256"), want)
	}
	if d.header.Get("X-GitHub-Event") != "pull_request" || len(d.header.Get("X-GitHub-Delivery")) != 36 ||
		d.header.Get("Content-Type") != "application/json" || !strings.HasPrefix(d.header.Get("User-Agent"), "GitHub-Hookshot/") {
		t.Fatalf("headers %v", d.header)
	}
	if err := github.ValidateSignature(d.header.Get("X-Hub-Signature-256"), d.body, []byte(secret)); err != nil {
		t.Fatal(err)
	}
	ev, err := github.ParseWebHook("pull_request", d.body)
	if err != nil {
		t.Fatal(err)
	}
	pe := ev.(*github.PullRequestEvent)
	if pe.GetAction() != "closed" || pe.GetNumber() != 1 || !pe.GetPullRequest().GetMerged() ||
		pe.GetRepo().GetFullName() != "acme/widgets" || pe.GetRepo().GetOwner().GetLogin() != "acme" || pe.GetSender().GetLogin() != "acme" {
		t.Fatalf("event %v", pe)
	}

	// A review event, without a secret: no signature headers.
	rv := f.srv.AddReview("acme", "widgets", 1, "alice", "APPROVED", "")
	resp, err = f.srv.Deliver(context.Background(), recv.URL, "", "pull_request_review", githubtest.PullRequestReviewEvent("submitted", pr, rv))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d = <-got
	if d.header.Get("X-Hub-Signature-256") != "" || d.header.Get("X-Hub-Signature") != "" {
		t.Fatalf("signed without a secret: %v", d.header)
	}
	ev, err = github.ParseWebHook("pull_request_review", d.body)
	if err != nil {
		t.Fatal(err)
	}
	if re := ev.(*github.PullRequestReviewEvent); re.GetReview().GetState() != "APPROVED" || re.GetSender().GetLogin() != "alice" {
		t.Fatalf("review event %v", re)
	}
}
