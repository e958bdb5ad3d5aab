package githubtest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// prState is a pull request as the fake holds it.
type prState struct {
	id, number          int
	title               string
	body                string
	author              string
	headRef, baseRef    string
	headSHA, baseSHA    string
	open                bool
	draft               bool
	maintainerCanModify bool
	created, updated    time.Time
	closed, mergedAt    time.Time // zero when not
	merged              bool
	mergeCommit         string
	mergedBy            string
	labels              []string // names, in order added
	requested           []string // logins
	reviews             []*reviewState

	statsKey string // base..head the stats were computed for
	stats    prStats
}

type prStats struct {
	commits, additions, deletions, changedFiles int
	mergeable                                   bool
}

type reviewState struct {
	id        int64
	user      string
	state     string
	body      string
	submitted time.Time
	commitID  string
}

// Wire types: the JSON GitHub sends, field for field (nullable fields are
// pointers without omitempty, so they appear as null).

type wireUser struct {
	Login      string `json:"login"`
	ID         int64  `json:"id"`
	NodeID     string `json:"node_id"`
	AvatarURL  string `json:"avatar_url"`
	GravatarID string `json:"gravatar_id"`
	URL        string `json:"url"`
	HTMLURL    string `json:"html_url"`
	Type       string `json:"type"`
	SiteAdmin  bool   `json:"site_admin"`
}

type wireRepo struct {
	ID            int64    `json:"id"`
	NodeID        string   `json:"node_id"`
	Name          string   `json:"name"`
	FullName      string   `json:"full_name"`
	Private       bool     `json:"private"`
	Owner         wireUser `json:"owner"`
	HTMLURL       string   `json:"html_url"`
	Description   *string  `json:"description"`
	Fork          bool     `json:"fork"`
	URL           string   `json:"url"`
	PullsURL      string   `json:"pulls_url"`
	GitURL        string   `json:"git_url"`
	CloneURL      string   `json:"clone_url"`
	Visibility    string   `json:"visibility"`
	DefaultBranch string   `json:"default_branch"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	Archived      bool     `json:"archived"`
	Disabled      bool     `json:"disabled"`
}

type wireLabel struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
	Description *string `json:"description"`
}

type wireBranch struct {
	Label string    `json:"label"`
	Ref   string    `json:"ref"`
	SHA   string    `json:"sha"`
	User  wireUser  `json:"user"`
	Repo  *wireRepo `json:"repo"`
}

type href struct {
	Href string `json:"href"`
}

type wirePRLinks struct {
	Self           href `json:"self"`
	HTML           href `json:"html"`
	Issue          href `json:"issue"`
	Comments       href `json:"comments"`
	ReviewComments href `json:"review_comments"`
	ReviewComment  href `json:"review_comment"`
	Commits        href `json:"commits"`
	Statuses       href `json:"statuses"`
}

// wirePR is GitHub's "pull-request-simple": what lists return.
type wirePR struct {
	URL                string      `json:"url"`
	ID                 int64       `json:"id"`
	NodeID             string      `json:"node_id"`
	HTMLURL            string      `json:"html_url"`
	DiffURL            string      `json:"diff_url"`
	PatchURL           string      `json:"patch_url"`
	IssueURL           string      `json:"issue_url"`
	CommitsURL         string      `json:"commits_url"`
	ReviewCommentsURL  string      `json:"review_comments_url"`
	ReviewCommentURL   string      `json:"review_comment_url"`
	CommentsURL        string      `json:"comments_url"`
	StatusesURL        string      `json:"statuses_url"`
	Number             int         `json:"number"`
	State              string      `json:"state"`
	Locked             bool        `json:"locked"`
	Title              string      `json:"title"`
	User               wireUser    `json:"user"`
	Body               *string     `json:"body"`
	Labels             []wireLabel `json:"labels"`
	Milestone          *struct{}   `json:"milestone"`
	ActiveLockReason   *string     `json:"active_lock_reason"`
	CreatedAt          string      `json:"created_at"`
	UpdatedAt          string      `json:"updated_at"`
	ClosedAt           *string     `json:"closed_at"`
	MergedAt           *string     `json:"merged_at"`
	MergeCommitSHA     *string     `json:"merge_commit_sha"`
	Assignee           *wireUser   `json:"assignee"`
	Assignees          []wireUser  `json:"assignees"`
	RequestedReviewers []wireUser  `json:"requested_reviewers"`
	RequestedTeams     []struct{}  `json:"requested_teams"`
	Head               wireBranch  `json:"head"`
	Base               wireBranch  `json:"base"`
	Links              wirePRLinks `json:"_links"`
	AuthorAssociation  string      `json:"author_association"`
	AutoMerge          *struct{}   `json:"auto_merge"`
	Draft              bool        `json:"draft"`
}

// wirePRFull is GitHub's "pull-request": what single-PR answers return.
type wirePRFull struct {
	wirePR
	Merged              bool      `json:"merged"`
	Mergeable           *bool     `json:"mergeable"`
	Rebaseable          *bool     `json:"rebaseable"`
	MergeableState      string    `json:"mergeable_state"`
	MergedBy            *wireUser `json:"merged_by"`
	Comments            int       `json:"comments"`
	ReviewComments      int       `json:"review_comments"`
	MaintainerCanModify bool      `json:"maintainer_can_modify"`
	Commits             int       `json:"commits"`
	Additions           int       `json:"additions"`
	Deletions           int       `json:"deletions"`
	ChangedFiles        int       `json:"changed_files"`
}

type wireReview struct {
	ID                int64    `json:"id"`
	NodeID            string   `json:"node_id"`
	User              wireUser `json:"user"`
	Body              string   `json:"body"`
	State             string   `json:"state"`
	HTMLURL           string   `json:"html_url"`
	PullRequestURL    string   `json:"pull_request_url"`
	AuthorAssociation string   `json:"author_association"`
	Links             struct {
		HTML        href `json:"html"`
		PullRequest href `json:"pull_request"`
	} `json:"_links"`
	SubmittedAt string `json:"submitted_at"`
	CommitID    string `json:"commit_id"`
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func tsPtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	v := ts(t)
	return &v
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nodeID makes an opaque GraphQL id in GitHub's style.
func nodeID(prefix string, id int64) string {
	var b [12]byte
	copy(b[:4], "kwDO")
	binary.BigEndian.PutUint64(b[4:], uint64(id))
	return prefix + "_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Server) api(format string, args ...any) string {
	return s.base + "/api/v3" + fmt.Sprintf(format, args...)
}

// Callers of the render functions hold s.mu.

func (s *Server) userJSON(login string) wireUser {
	id := s.userID(login)
	return wireUser{
		Login: login, ID: id, NodeID: nodeID("U", id),
		AvatarURL: fmt.Sprintf("%s/avatars/u/%d?v=4", s.base, id),
		URL:       s.api("/users/%s", url.PathEscape(login)),
		HTMLURL:   s.base + "/" + login,
		Type:      "User",
	}
}

func (s *Server) repoJSON(rp *repoState) *wireRepo {
	return &wireRepo{
		ID: rp.id, NodeID: nodeID("R", rp.id), Name: rp.name, FullName: rp.owner + "/" + rp.name,
		Private: true, Owner: s.userJSON(rp.owner),
		HTMLURL:       s.base + "/" + rp.owner + "/" + rp.name,
		URL:           s.api("/repos/%s/%s", rp.owner, rp.name),
		PullsURL:      s.api("/repos/%s/%s/pulls{/number}", rp.owner, rp.name),
		GitURL:        "git" + strings.TrimPrefix(s.base, "http") + "/" + rp.owner + "/" + rp.name + ".git",
		CloneURL:      s.base + "/" + rp.owner + "/" + rp.name + ".git",
		Visibility:    "private",
		DefaultBranch: rp.defaultBranch,
		CreatedAt:     ts(rp.created), UpdatedAt: ts(rp.created),
	}
}

func (s *Server) labelJSON(rp *repoState, l *labelState) wireLabel {
	return wireLabel{
		ID: l.id, NodeID: nodeID("LA", l.id), Name: l.name, Color: l.color,
		URL: s.api("/repos/%s/%s/labels/%s", rp.owner, rp.name, url.PathEscape(l.name)),
	}
}

func (rp *repoState) label(name string) *labelState {
	for _, l := range rp.labels {
		if strings.EqualFold(l.name, name) {
			return l
		}
	}
	return nil
}

func (s *Server) prSimple(rp *repoState, pr *prState) wirePR {
	api := s.api("/repos/%s/%s/pulls/%d", rp.owner, rp.name, pr.number)
	issue := s.api("/repos/%s/%s/issues/%d", rp.owner, rp.name, pr.number)
	html := fmt.Sprintf("%s/%s/%s/pull/%d", s.base, rp.owner, rp.name, pr.number)
	statuses := s.api("/repos/%s/%s/statuses/%s", rp.owner, rp.name, pr.headSHA)
	repo := s.repoJSON(rp)
	owner := s.userJSON(rp.owner)
	state := "closed"
	if pr.open {
		state = "open"
	}
	w := wirePR{
		URL: api, ID: int64(pr.id), NodeID: nodeID("PR", int64(pr.id)), HTMLURL: html,
		DiffURL: html + ".diff", PatchURL: html + ".patch", IssueURL: issue,
		CommitsURL: api + "/commits", ReviewCommentsURL: api + "/comments",
		ReviewCommentURL: s.api("/repos/%s/%s/pulls/comments{/number}", rp.owner, rp.name),
		CommentsURL:      issue + "/comments", StatusesURL: statuses,
		Number: pr.number, State: state, Title: pr.title, User: s.userJSON(pr.author),
		Body: strPtr(pr.body), Labels: []wireLabel{},
		CreatedAt: ts(pr.created), UpdatedAt: ts(pr.updated),
		ClosedAt: tsPtr(pr.closed), MergedAt: tsPtr(pr.mergedAt), MergeCommitSHA: strPtr(pr.mergeCommit),
		Assignees: []wireUser{}, RequestedReviewers: []wireUser{}, RequestedTeams: []struct{}{},
		Head: wireBranch{Label: rp.owner + ":" + pr.headRef, Ref: pr.headRef, SHA: pr.headSHA, User: owner, Repo: repo},
		Base: wireBranch{Label: rp.owner + ":" + pr.baseRef, Ref: pr.baseRef, SHA: pr.baseSHA, User: owner, Repo: repo},
		Links: wirePRLinks{
			Self: href{api}, HTML: href{html}, Issue: href{issue}, Comments: href{issue + "/comments"},
			ReviewComments: href{api + "/comments"},
			ReviewComment:  href{s.api("/repos/%s/%s/pulls/comments{/number}", rp.owner, rp.name)},
			Commits:        href{api + "/commits"}, Statuses: href{statuses},
		},
		AuthorAssociation: "OWNER",
		Draft:             pr.draft,
	}
	if !strings.EqualFold(pr.author, rp.owner) {
		w.AuthorAssociation = "COLLABORATOR"
	}
	for _, name := range pr.labels {
		if l := rp.label(name); l != nil {
			w.Labels = append(w.Labels, s.labelJSON(rp, l))
		}
	}
	for _, u := range pr.requested {
		w.RequestedReviewers = append(w.RequestedReviewers, s.userJSON(u))
	}
	return w
}

var shortstatRE = regexp.MustCompile(`(\d+) (file|insertion|deletion)`)

// computeStats fills pr.stats from the bare repository, once per
// base/head pair.
func (s *Server) computeStats(rp *repoState, pr *prState) {
	key := pr.baseSHA + ".." + pr.headSHA
	if pr.statsKey == key {
		return
	}
	var st prStats
	if n, err := s.git(rp.dir, "", "rev-list", "--count", pr.baseSHA+".."+pr.headSHA); err == nil {
		st.commits, _ = strconv.Atoi(n)
	}
	if out, err := s.git(rp.dir, "", "diff", "--shortstat", pr.baseSHA+"..."+pr.headSHA); err == nil {
		for _, m := range shortstatRE.FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[1])
			switch m[2] {
			case "file":
				st.changedFiles = n
			case "insertion":
				st.additions = n
			case "deletion":
				st.deletions = n
			}
		}
	}
	_, err := s.git(rp.dir, "", "merge-tree", "--write-tree", "--no-messages", pr.baseSHA, pr.headSHA)
	st.mergeable = err == nil
	pr.stats, pr.statsKey = st, key
}

func (s *Server) prFull(rp *repoState, pr *prState) wirePRFull {
	w := wirePRFull{
		wirePR:              s.prSimple(rp, pr),
		Merged:              pr.merged,
		MergeableState:      "unknown",
		MaintainerCanModify: pr.maintainerCanModify,
	}
	s.computeStats(rp, pr)
	w.Commits, w.Additions, w.Deletions, w.ChangedFiles = pr.stats.commits, pr.stats.additions, pr.stats.deletions, pr.stats.changedFiles
	if pr.open {
		m := pr.stats.mergeable
		w.Mergeable, w.Rebaseable = &m, &m
		switch {
		case !m:
			w.MergeableState = "dirty"
		case pr.draft:
			w.MergeableState = "draft"
		default:
			w.MergeableState = "clean"
		}
	}
	if pr.merged {
		u := s.userJSON(pr.mergedBy)
		w.MergedBy = &u
	}
	return w
}

func (s *Server) reviewJSON(rp *repoState, pr *prState, r *reviewState) wireReview {
	html := fmt.Sprintf("%s/%s/%s/pull/%d#pullrequestreview-%d", s.base, rp.owner, rp.name, pr.number, r.id)
	api := s.api("/repos/%s/%s/pulls/%d", rp.owner, rp.name, pr.number)
	w := wireReview{
		ID: r.id, NodeID: nodeID("PRR", r.id), User: s.userJSON(r.user), Body: r.body, State: r.state,
		HTMLURL: html, PullRequestURL: api, AuthorAssociation: "COLLABORATOR",
		SubmittedAt: ts(r.submitted), CommitID: r.commitID,
	}
	if strings.EqualFold(r.user, rp.owner) {
		w.AuthorAssociation = "OWNER"
	}
	w.Links.HTML = href{html}
	w.Links.PullRequest = href{api}
	return w
}

// toGitHub converts wire JSON into a go-github value through JSON, so
// tests see exactly what a client would decode.
func toGitHub[T any](v any) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic("githubtest: " + err.Error())
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic("githubtest: " + err.Error())
	}
	return out
}

// PRs returns every pull request of owner/repo as the API would answer
// GET .../pulls/{n}, in number order.
func (s *Server) PRs(owner, repo string) []*github.PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[strings.ToLower(owner+"/"+repo)]
	if rp == nil {
		return nil
	}
	s.syncRepo(rp)
	out := make([]*github.PullRequest, 0, len(rp.prs))
	for _, pr := range rp.prs {
		out = append(out, toGitHub[github.PullRequest](s.prFull(rp, pr)))
	}
	return out
}
