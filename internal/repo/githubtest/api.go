package githubtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

const (
	docsPulls     = "https://docs.github.com/rest/pulls/pulls"
	docsReviews   = "https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request"
	docsReviewers = "https://docs.github.com/rest/pulls/review-requests#request-reviewers-for-a-pull-request"
	docsLabels    = "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue"
	docsRefs      = "https://docs.github.com/rest/git/refs#delete-a-reference"
	docsRepos     = "https://docs.github.com/rest/repos/repos#get-a-repository"
)

// route dispatches an authorized, not rate-limited API request. Callers
// hold s.mu.
func (s *Server) route(r *http.Request, rel string, body []byte, now time.Time) *reply {
	if rel == "/user" && r.Method == http.MethodGet {
		return &reply{status: http.StatusOK, v: s.userJSON(s.opts.Login)}
	}
	segs := strings.Split(strings.Trim(rel, "/"), "/")
	if len(segs) < 3 || segs[0] != "repos" {
		return notFound("")
	}
	rp := s.repos[strings.ToLower(segs[1]+"/"+segs[2])]
	if rp == nil {
		return notFound(docsRepos)
	}
	rest := segs[3:]
	m := r.Method
	if len(rest) == 0 {
		if m == http.MethodGet {
			return &reply{status: http.StatusOK, v: s.repoJSON(rp)}
		}
		return notFound(docsRepos)
	}
	refs, err := s.syncRepo(rp)
	if err != nil {
		s.logf("reading refs of %s/%s: %v", rp.owner, rp.name, err)
		return errReply(http.StatusInternalServerError, "Server Error", "")
	}
	switch {
	case rest[0] == "pulls" && len(rest) == 1:
		switch m {
		case http.MethodGet:
			return s.listPulls(r, rp)
		case http.MethodPost:
			return s.createPull(rp, refs, body, now)
		}
	case rest[0] == "pulls" && len(rest) >= 2:
		pr := rp.pr(rest[1])
		if pr == nil {
			return notFound(docsPulls + "#get-a-pull-request")
		}
		sub := strings.Join(rest[2:], "/")
		switch {
		case sub == "" && m == http.MethodGet:
			return &reply{status: http.StatusOK, v: s.prFull(rp, pr), lastMod: pr.updated}
		case sub == "" && m == http.MethodPatch:
			return s.editPull(rp, pr, refs, body, now)
		case sub == "reviews" && m == http.MethodGet:
			list := make([]wireReview, 0, len(pr.reviews))
			for _, rv := range pr.reviews {
				list = append(list, s.reviewJSON(rp, pr, rv))
			}
			return paginate(s, r, list)
		case sub == "merge" && m == http.MethodGet:
			if pr.merged {
				return &reply{status: http.StatusNoContent}
			}
			return notFound(docsPulls + "#check-if-a-pull-request-has-been-merged")
		case sub == "merge" && m == http.MethodPut:
			return s.mergePull(rp, pr, body)
		case sub == "requested_reviewers" && m == http.MethodPost:
			return s.requestReviewers(rp, pr, body, now)
		case sub == "requested_reviewers" && m == http.MethodGet:
			users := make([]wireUser, 0, len(pr.requested))
			for _, u := range pr.requested {
				users = append(users, s.userJSON(u))
			}
			return &reply{status: http.StatusOK, v: map[string]any{"users": users, "teams": []struct{}{}}}
		}
	case rest[0] == "issues" && len(rest) == 3 && rest[2] == "labels":
		pr := rp.pr(rest[1])
		if pr == nil {
			return notFound(docsLabels)
		}
		switch m {
		case http.MethodPost:
			return s.addLabels(rp, pr, body, now)
		case http.MethodGet:
			return paginate(s, r, s.prLabels(rp, pr))
		}
	case rest[0] == "git" && len(rest) >= 4 && rest[1] == "refs" && m == http.MethodDelete:
		return s.deleteRef(rp, refs, strings.Join(rest[2:], "/"), now)
	}
	return notFound("")
}

// pr returns the pull request with number n (a path segment), or nil.
func (rp *repoState) pr(n string) *prState {
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 || i > len(rp.prs) {
		return nil
	}
	return rp.prs[i-1]
}

// syncRepo reads the branches of the bare repository and brings open pull
// requests up to date, as GitHub does after a push: a moved head updates
// head.sha and updated_at; a deleted head branch closes the pull request.
// Callers hold s.mu.
func (s *Server) syncRepo(rp *repoState) (map[string]string, error) {
	refs, err := s.branches(rp)
	if err != nil {
		return nil, err
	}
	now := s.now()
	for _, pr := range rp.prs {
		if !pr.open {
			continue
		}
		if b, ok := refs[pr.baseRef]; ok {
			pr.baseSHA = b
		}
		h, ok := refs[pr.headRef]
		switch {
		case !ok:
			pr.open = false
			pr.closed, pr.updated = now, now
		case h != pr.headSHA:
			pr.headSHA = h
			pr.updated = now
		}
	}
	return refs, nil
}

// paginate answers one page of all with GitHub's Link header (prev, next,
// last, first) from the page and per_page parameters (default 30, at most
// 100).
func paginate[T any](s *Server, r *http.Request, all []T) *reply {
	q := r.URL.Query()
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage <= 0 {
		perPage = 30
	}
	perPage = min(perPage, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	last := max((len(all)+perPage-1)/perPage, 1)
	lo := min((page-1)*perPage, len(all))
	hi := min(lo+perPage, len(all))
	rep := &reply{status: http.StatusOK, v: append([]T{}, all[lo:hi]...)}
	link := func(p int, rel string) string {
		q.Set("page", strconv.Itoa(p))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, s.base, r.URL.EscapedPath(), q.Encode(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(min(page-1, last), "prev"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		rep.header = http.Header{"Link": {strings.Join(links, ", ")}}
	}
	return rep
}

func (s *Server) listPulls(r *http.Request, rp *repoState) *reply {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	switch state {
	case "open", "closed", "all":
	default:
		return validationFailed(docsPulls+"#list-pull-requests",
			fieldError{Resource: "PullRequest", Code: "invalid", Field: "state"})
	}
	head, base := q.Get("head"), q.Get("base")
	var sel []*prState
	for _, pr := range rp.prs {
		if (state == "open" && !pr.open) || (state == "closed" && pr.open) {
			continue
		}
		if head != "" {
			owner, ref, ok := strings.Cut(head, ":")
			if !strings.EqualFold(owner, rp.owner) || (ok && ref != pr.headRef) {
				continue
			}
		}
		if base != "" && base != pr.baseRef {
			continue
		}
		sel = append(sel, pr)
	}
	sortBy := q.Get("sort")
	dir := q.Get("direction")
	if dir == "" {
		dir = "asc"
		if sortBy == "" || sortBy == "created" {
			dir = "desc"
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		a, b := sel[i], sel[j]
		var less bool
		if sortBy == "updated" {
			less = a.updated.Before(b.updated) || (a.updated.Equal(b.updated) && a.number < b.number)
		} else {
			less = a.number < b.number
		}
		if dir == "desc" {
			return !less
		}
		return less
	})
	list := make([]wirePR, 0, len(sel))
	for _, pr := range sel {
		list = append(list, s.prSimple(rp, pr))
	}
	return paginate(s, r, list)
}

func badJSON() *reply {
	return errReply(http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/rest")
}

func (s *Server) createPull(rp *repoState, refs map[string]string, body []byte, now time.Time) *reply {
	var in struct {
		Title               *string `json:"title"`
		Head                string  `json:"head"`
		Base                string  `json:"base"`
		Body                *string `json:"body"`
		Draft               bool    `json:"draft"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badJSON()
	}
	docs := docsPulls + "#create-a-pull-request"
	switch {
	case in.Title == nil || *in.Title == "":
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "missing_field", Field: "title"})
	case in.Head == "":
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "missing_field", Field: "head"})
	case in.Base == "":
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "missing_field", Field: "base"})
	}
	headRef := in.Head
	if owner, ref, ok := strings.Cut(in.Head, ":"); ok {
		if !strings.EqualFold(owner, rp.owner) { // forks are not modelled
			return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "head"})
		}
		headRef = ref
	}
	baseSHA, ok := refs[in.Base]
	if !ok {
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "base"})
	}
	headSHA, ok := refs[headRef]
	if !ok {
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "head"})
	}
	for _, pr := range rp.prs {
		if pr.open && pr.headRef == headRef && pr.baseRef == in.Base {
			return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "custom",
				Message: "A pull request already exists for " + rp.owner + ":" + headRef + "."})
		}
	}
	n, err := s.git(rp.dir, "", "rev-list", "--count", baseSHA+".."+headSHA)
	if err != nil {
		s.logf("rev-list: %v", err)
		return errReply(http.StatusInternalServerError, "Server Error", "")
	}
	if n == "0" {
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "custom",
			Message: "No commits between " + in.Base + " and " + headRef})
	}
	pr := &prState{
		id: int(s.newID()), number: len(rp.prs) + 1, title: *in.Title, author: s.opts.Login,
		headRef: headRef, baseRef: in.Base, headSHA: headSHA, baseSHA: baseSHA,
		open: true, draft: in.Draft, maintainerCanModify: in.MaintainerCanModify == nil || *in.MaintainerCanModify,
		created: now, updated: now,
	}
	if in.Body != nil {
		pr.body = *in.Body
	}
	rp.prs = append(rp.prs, pr)
	w := s.prFull(rp, pr)
	return &reply{status: http.StatusCreated, v: w, header: http.Header{"Location": {w.URL}}}
}

func (s *Server) editPull(rp *repoState, pr *prState, refs map[string]string, body []byte, now time.Time) *reply {
	var in struct {
		Title               *string `json:"title"`
		Body                *string `json:"body"`
		State               *string `json:"state"`
		Base                *string `json:"base"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badJSON()
	}
	docs := docsPulls + "#update-a-pull-request"
	if in.Base != nil {
		sha, ok := refs[*in.Base]
		if !ok {
			return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "base"})
		}
		pr.baseRef, pr.baseSHA = *in.Base, sha
	}
	if in.State != nil {
		switch *in.State {
		case "closed":
			if pr.open {
				pr.open = false
				pr.closed = now
			}
		case "open":
			if !pr.open {
				if _, ok := refs[pr.headRef]; !ok || pr.merged {
					return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "custom",
						Message: "state cannot be changed. The " + pr.headRef + " branch has been deleted."})
				}
				pr.open = true
				pr.closed = time.Time{}
				pr.headSHA = refs[pr.headRef]
			}
		default:
			return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "state"})
		}
	}
	if in.Title != nil {
		pr.title = *in.Title
	}
	if in.Body != nil {
		pr.body = *in.Body
	}
	if in.MaintainerCanModify != nil {
		pr.maintainerCanModify = *in.MaintainerCanModify
	}
	pr.updated = now
	return &reply{status: http.StatusOK, v: s.prFull(rp, pr)}
}

// Merge failures and GitHub's messages for them.
var (
	errNotMergeable = errors.New("githubtest: pull request is not mergeable")
	errHeadModified = errors.New("githubtest: head branch was modified")
	errNoRebase     = errors.New("githubtest: branch can't be rebased")

	mergeMessages = map[error]string{
		errNotMergeable: "Pull Request is not mergeable",
		errHeadModified: "Head branch was modified. Review and try the merge again.",
		errNoRebase:     "This branch can't be rebased",
	}
)

// merge merges pr into its base in the bare repository with a real
// commit and marks it merged. Callers hold s.mu and have synced rp.
func (s *Server) merge(rp *repoState, pr *prState, method, title, message, expectSHA, by string) (string, error) {
	if !pr.open {
		return "", errNotMergeable
	}
	if expectSHA != "" && expectSHA != pr.headSHA {
		return "", errHeadModified
	}
	var commit string
	switch method {
	case "", "merge", "squash":
		tree, err := s.git(rp.dir, "", "merge-tree", "--write-tree", "--no-messages", pr.baseSHA, pr.headSHA)
		if errors.Is(err, errExit1) {
			return "", errNotMergeable
		}
		if err != nil {
			return "", err
		}
		tree, _, _ = strings.Cut(tree, "\n")
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d from %s/%s", pr.number, rp.owner, pr.headRef)
			if method == "squash" {
				title = fmt.Sprintf("%s (#%d)", pr.title, pr.number)
			}
		}
		if message == "" && method != "squash" {
			message = pr.title
		}
		msg := title
		if message != "" {
			msg += "\n\n" + message
		}
		args := []string{"commit-tree", tree, "-p", pr.baseSHA}
		if method != "squash" {
			args = append(args, "-p", pr.headSHA)
		}
		commit, err = s.git(rp.dir, "", append(args, "-m", msg)...)
		if err != nil {
			return "", err
		}
	case "rebase":
		if _, err := s.git(rp.dir, "", "merge-base", "--is-ancestor", pr.baseSHA, pr.headSHA); err != nil {
			return "", errNoRebase // only fast-forwards are modelled
		}
		commit = pr.headSHA
	default:
		return "", fmt.Errorf("merge_method %q", method)
	}
	if _, err := s.git(rp.dir, "", "update-ref", "refs/heads/"+pr.baseRef, commit, pr.baseSHA); err != nil {
		return "", errHeadModified // the base moved underneath
	}
	now := s.now()
	pr.open, pr.merged = false, true
	pr.closed, pr.mergedAt, pr.updated = now, now, now
	pr.mergeCommit, pr.mergedBy = commit, by
	return commit, nil
}

func (s *Server) mergePull(rp *repoState, pr *prState, body []byte) *reply {
	var in struct {
		CommitTitle   string  `json:"commit_title"`
		CommitMessage *string `json:"commit_message"`
		SHA           string  `json:"sha"`
		MergeMethod   string  `json:"merge_method"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return badJSON()
		}
	}
	docs := docsPulls + "#merge-a-pull-request"
	switch in.MergeMethod {
	case "", "merge", "squash", "rebase":
	default:
		return validationFailed(docs, fieldError{Resource: "PullRequest", Code: "invalid", Field: "merge_method"})
	}
	if pr.open && pr.draft {
		return errReply(http.StatusMethodNotAllowed, "Pull Request is still a draft", docs)
	}
	msg := ""
	if in.CommitMessage != nil {
		msg = *in.CommitMessage
	}
	sha, err := s.merge(rp, pr, in.MergeMethod, in.CommitTitle, msg, in.SHA, s.opts.Login)
	switch {
	case errors.Is(err, errHeadModified):
		return errReply(http.StatusConflict, mergeMessages[errHeadModified], docs)
	case errors.Is(err, errNotMergeable), errors.Is(err, errNoRebase):
		return errReply(http.StatusMethodNotAllowed, mergeMessages[err], docs)
	case err != nil:
		s.logf("merge: %v", err)
		return errReply(http.StatusInternalServerError, "Server Error", "")
	}
	return &reply{status: http.StatusOK, v: map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"}}
}

func (s *Server) requestReviewers(rp *repoState, pr *prState, body []byte, now time.Time) *reply {
	var in struct {
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badJSON()
	}
	for _, u := range in.Reviewers {
		if strings.EqualFold(u, pr.author) {
			return errReply(http.StatusUnprocessableEntity, "Review cannot be requested from pull request author.", docsReviewers)
		}
	}
	if len(in.TeamReviewers) > 0 { // teams are not modelled
		return errReply(http.StatusUnprocessableEntity, "Reviews may only be requested from collaborators. One or more of the teams you specified is not a collaborator of the "+rp.owner+"/"+rp.name+" repository.", docsReviewers)
	}
	for _, u := range in.Reviewers {
		if !containsFold(pr.requested, u) {
			pr.requested = append(pr.requested, u)
		}
	}
	pr.updated = now
	return &reply{status: http.StatusCreated, v: s.prSimple(rp, pr)}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func (s *Server) prLabels(rp *repoState, pr *prState) []wireLabel {
	out := []wireLabel{}
	for _, name := range pr.labels {
		if l := rp.label(name); l != nil {
			out = append(out, s.labelJSON(rp, l))
		}
	}
	return out
}

func (s *Server) addLabels(rp *repoState, pr *prState, body []byte, now time.Time) *reply {
	var names []string
	if err := json.Unmarshal(body, &names); err != nil {
		var in struct {
			Labels []string `json:"labels"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return badJSON()
		}
		names = in.Labels
	}
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return validationFailed(docsLabels, fieldError{Resource: "Label", Code: "invalid", Field: "name"})
		}
		l := rp.label(name)
		if l == nil {
			l = &labelState{id: s.newID(), name: name, color: "ededed"}
			rp.labels = append(rp.labels, l)
		}
		if !containsFold(pr.labels, l.name) {
			pr.labels = append(pr.labels, l.name)
		}
	}
	pr.updated = now
	return &reply{status: http.StatusOK, v: s.prLabels(rp, pr)}
}

func (s *Server) deleteRef(rp *repoState, refs map[string]string, ref string, now time.Time) *reply {
	ref = strings.TrimPrefix(ref, "refs/")
	branch, isHead := strings.CutPrefix(ref, "heads/")
	missing := errReply(http.StatusUnprocessableEntity, "Reference does not exist", docsRefs)
	if !isHead {
		if _, err := s.git(rp.dir, "", "show-ref", "--verify", "--quiet", "refs/"+ref); err != nil {
			return missing
		}
	} else if _, ok := refs[branch]; !ok {
		return missing
	}
	if isHead && branch == rp.defaultBranch {
		return validationFailed(docsRefs, fieldError{Resource: "Reference", Code: "custom", Message: "Cannot delete the default branch"})
	}
	if _, err := s.git(rp.dir, "", "update-ref", "-d", "refs/"+ref); err != nil {
		s.logf("update-ref -d: %v", err)
		return errReply(http.StatusInternalServerError, "Server Error", "")
	}
	if isHead {
		rp.deleted = append(rp.deleted, branch)
		if _, err := s.syncRepo(rp); err != nil { // closes pull requests from it
			s.logf("sync: %v", err)
		}
	}
	return &reply{status: http.StatusNoContent}
}

// lookup returns the repository and pull request for the test-side
// controls, synced. Callers hold s.mu.
func (s *Server) lookup(owner, repo string, number int) (*repoState, *prState, error) {
	rp := s.repos[strings.ToLower(owner+"/"+repo)]
	if rp == nil {
		return nil, nil, fmt.Errorf("githubtest: no repository %s/%s", owner, repo)
	}
	if _, err := s.syncRepo(rp); err != nil {
		return nil, nil, err
	}
	pr := rp.pr(strconv.Itoa(number))
	if pr == nil {
		return nil, nil, fmt.Errorf("githubtest: no pull request %s/%s#%d", owner, repo, number)
	}
	return rp, pr, nil
}

// MergePR merges the pull request as a person would with the "Merge pull
// request" button: it writes a real two-parent merge commit on the base
// branch of the bare repository (committer GitHub, dated Now) and marks
// the pull request merged: merged true, state closed, merged_at and
// closed_at Now, merge_commit_sha the merge commit, merged_by the
// repository owner. The head branch is kept. It fails when the pull
// request is not open or its branches conflict.
func (s *Server) MergePR(owner, repo string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, pr, err := s.lookup(owner, repo, number)
	if err != nil {
		return err
	}
	_, err = s.merge(rp, pr, "merge", "", "", "", rp.owner)
	return err
}

// ClosePR closes the pull request without merging it.
func (s *Server) ClosePR(owner, repo string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, pr, err := s.lookup(owner, repo, number)
	if err != nil {
		return err
	}
	if !pr.open {
		return fmt.Errorf("githubtest: %s/%s#%d is not open", owner, repo, number)
	}
	now := s.now()
	pr.open = false
	pr.closed, pr.updated = now, now
	return nil
}

// AddReview submits a review of the pull request by user, with state
// APPROVED, CHANGES_REQUESTED or COMMENTED, on its current head commit.
// As on GitHub, it removes user from the requested reviewers and bumps
// updated_at. It returns the review as GET .../reviews shows it, and
// panics for an unknown pull request or state.
func (s *Server) AddReview(owner, repo string, number int, user, state, body string) *github.PullRequestReview {
	switch state {
	case "APPROVED", "CHANGES_REQUESTED", "COMMENTED":
	default:
		panic("githubtest: AddReview: bad state " + strconv.Quote(state))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, pr, err := s.lookup(owner, repo, number)
	if err != nil {
		panic(err.Error())
	}
	now := s.now()
	rv := &reviewState{id: s.newID(), user: user, state: state, body: body, submitted: now, commitID: pr.headSHA}
	pr.reviews = append(pr.reviews, rv)
	kept := pr.requested[:0]
	for _, u := range pr.requested {
		if !strings.EqualFold(u, user) {
			kept = append(kept, u)
		}
	}
	pr.requested = kept
	pr.updated = now
	return toGitHub[github.PullRequestReview](s.reviewJSON(rp, pr, rv))
}
