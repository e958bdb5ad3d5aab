package repo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// DefaultGitHubAPI is github.com's API.
const DefaultGitHubAPI = "https://api.github.com/"

// GitHubConfig configures pull requests on GitHub.
type GitHubConfig struct {
	// Token authenticates the API and pushes. It is sent in headers only:
	// never on a command line, in a checkout's configuration or a log.
	Token string
	// APIBaseURL is GitHub Enterprise's API (https://host/api/v3/); empty
	// is github.com.
	APIBaseURL string
	// HTTPClient carries the API requests; default one with a 30 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Observer, when set, is told of every API response (for metrics).
	Observer GitHubObserver
	// Clock dates rate limits' resets; nil: the workspaces' clock.
	Clock clock.Clock
}

// GitHubObserver is told of each request to GitHub's API. Its methods
// must not block.
type GitHubObserver interface {
	// GitHubResponse reports one request's answer: its HTTP status (0 when
	// none came: a network error) and, when GitHub sent it, the
	// X-RateLimit-Remaining header's value (remaining is -1 without one).
	GitHubResponse(status int, remaining int)
}

// observedTransport reports each response of next to obs.
type observedTransport struct {
	next http.RoundTripper
	obs  GitHubObserver
}

func (t observedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		t.obs.GitHubResponse(0, -1)
		return resp, err
	}
	remaining := -1
	if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			remaining = n
		}
	}
	t.obs.GitHubResponse(resp.StatusCode, remaining)
	return resp, nil
}

// DefaultGitHubTimeout bounds one request to GitHub, its body included.
const DefaultGitHubTimeout = 30 * time.Second

// deadlineTransport bounds each request with a context deadline rather than
// http.Client.Timeout. go-github replaces the body of an error answer (a 304
// to a conditional request is one) with a copy and never closes the
// original, and http.Client.Timeout keeps a goroutine per request until the
// original body is closed: every poll would leave one behind for the whole
// timeout. A context deadline holds no goroutine, and the deadline's timer
// is released when the body ends or is closed.
type deadlineTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t deadlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), t.timeout)
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelingBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelingBody releases its request's deadline once read to the end or
// closed.
type cancelingBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.cancel()
	}
	return n, err
}

func (b *cancelingBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// GitHub opens, checks and merges the pull requests of tasks.
type GitHub struct {
	cfg    GitHubConfig
	client *github.Client
	ws     *Workspaces
	// hosts are the hosts whose repositories live on this GitHub.
	hosts []string
	log   *slog.Logger
}

// NewGitHub returns the GitHub side of pull requests; ws pushes branches,
// and its Fence guards the writes made through the API (a pull request
// opened, merged, a branch deleted) as it guards git's.
func NewGitHub(cfg GitHubConfig, ws *Workspaces) (*GitHub, error) {
	if cfg.Token == "" {
		return nil, models.Errorf(models.CodeInvalid, "github.token: required")
	}
	if ws == nil {
		return nil, errors.New("new github: workspaces are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = ws.cfg.Clock
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: deadlineTransport{next: http.DefaultTransport, timeout: DefaultGitHubTimeout}}
	}
	if cfg.Observer != nil {
		// A copy: the caller's client keeps its own transport.
		c := *hc
		next := c.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		c.Transport = observedTransport{next: next, obs: cfg.Observer}
		hc = &c
	}
	client := github.NewClient(hc).WithAuthToken(cfg.Token)
	hosts, err := GitHubHosts(cfg.APIBaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.APIBaseURL != "" && strings.TrimSuffix(cfg.APIBaseURL, "/")+"/" != DefaultGitHubAPI {
		base := strings.TrimSuffix(cfg.APIBaseURL, "/") + "/"
		if client, err = client.WithEnterpriseURLs(base, base); err != nil {
			return nil, models.Errorf(models.CodeInvalid, "github.api_base_url: %v", err)
		}
	}
	return &GitHub{cfg: cfg, client: client, ws: ws, hosts: hosts, log: cfg.Logger}, nil
}

// GitHubHosts returns the host names whose repositories live on the GitHub
// of an API base URL (github.com's when empty).
func GitHubHosts(apiBaseURL string) ([]string, error) {
	if apiBaseURL == "" || apiBaseURL == DefaultGitHubAPI {
		return []string{"github.com"}, nil
	}
	u, err := url.Parse(apiBaseURL)
	if err != nil || u.Host == "" {
		return nil, models.Errorf(models.CodeInvalid, "github.api_base_url: %q is not a URL", apiBaseURL)
	}
	// api.github.com and api.<name>.ghe.com serve the repositories of the
	// host without "api.".
	return []string{strings.TrimPrefix(strings.ToLower(u.Hostname()), "api.")}, nil
}

// ParseRepoURL returns the host, owner and name of a repository URL in its
// https (https://host/owner/name.git) or ssh (git@host:owner/name.git,
// ssh://git@host/owner/name.git) form.
func ParseRepoURL(raw string) (host, owner, name string, err error) {
	raw = strings.TrimSpace(raw)
	var path string
	switch {
	case strings.Contains(raw, "://"):
		u, perr := url.Parse(raw)
		if perr != nil {
			var ue *url.Error
			if errors.As(perr, &ue) {
				perr = ue.Err // without the URL, which may hold credentials
			}
			return "", "", "", fmt.Errorf("repository URL %q: %w", models.RedactURL(raw), perr)
		}
		host, path = u.Hostname(), u.Path
	case strings.Contains(raw, ":") && !strings.HasPrefix(raw, "/"):
		// scp-like ssh: [user@]host:owner/name.git
		hostPart, p, _ := strings.Cut(raw, ":")
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		host, path = hostPart, p
	default:
		return "", "", "", fmt.Errorf("repository %q is a local path, not a URL", models.RedactURL(raw))
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git"), "/"), "/")
	if host == "" || len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", "", fmt.Errorf("repository URL %q does not name an owner and a repository", models.RedactURL(raw))
	}
	return strings.ToLower(host), parts[len(parts)-2], parts[len(parts)-1], nil
}

// RepoOf returns the owner and name of a project's repository on this
// GitHub, or an invalid error saying why it has none.
func (g *GitHub) RepoOf(p models.Project) (owner, name string, err error) {
	if p.Repo == nil || p.Repo.URL == "" {
		return "", "", models.Errorf(models.CodeInvalid, "project %s has no repository URL: pull requests need a CLONE repository on GitHub", p.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return "", "", err
	}
	host, owner, name, err := ParseRepoURL(p.Repo.URL)
	if err != nil {
		return "", "", models.Errorf(models.CodeInvalid, "project %s: %v", p.ID, err)
	}
	if !slices.Contains(g.hosts, host) {
		return "", "", models.Errorf(models.CodeInvalid, "project %s's repository is on %s, not on GitHub (%s): it cannot land through a pull request",
			p.ID, host, strings.Join(g.hosts, ", "))
	}
	return owner, name, nil
}

// Hosts are the host names whose repositories live on this GitHub: the
// ones Workspaces' Credentials should send the token to.
func (g *GitHub) Hosts() []string { return slices.Clone(g.hosts) }

// Open pushes the task's branch and opens its pull request, or finds the
// one already open for the branch (a retry after a crash opens no second).
func (g *GitHub) Open(ctx context.Context, p models.Project, t models.Task, src string, c models.PRContent) (models.PullRequest, error) {
	owner, name, err := g.RepoOf(p)
	if err != nil {
		return models.PullRequest{}, err
	}
	branch := BranchName(t)
	_, contained, err := g.ws.PushBranch(ctx, p, t, src)
	if err != nil {
		return models.PullRequest{}, g.redact(fmt.Errorf("push %s: %w", branch, err))
	}
	if contained {
		// Nothing to review: the default branch has the work already.
		return models.PullRequest{TaskID: t.ID, ProjectID: p.ID, Owner: owner, Repo: name, Branch: branch}, nil
	}
	pr, err := g.find(ctx, owner, name, branch)
	if err != nil {
		return models.PullRequest{}, err
	}
	if pr == nil {
		if err := g.ws.fenced(ctx); err != nil {
			return models.PullRequest{}, fmt.Errorf("open the pull request of %s: %w", branch, err)
		}
		pr, err = g.create(ctx, p, t, owner, name, branch, c)
		if err != nil {
			return models.PullRequest{}, err
		}
	}
	return models.PullRequest{TaskID: t.ID, ProjectID: p.ID, Owner: owner, Repo: name, Number: pr.GetNumber(),
		URL: pr.GetHTMLURL(), Branch: branch, State: models.PROpen}, nil
}

// find returns the open pull request of a branch, if any.
func (g *GitHub) find(ctx context.Context, owner, name, branch string) (*github.PullRequest, error) {
	prs, _, err := g.client.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{State: "open", Head: owner + ":" + branch})
	if err != nil {
		return nil, g.redact(fmt.Errorf("list pull requests of %s/%s: %w", owner, name, err))
	}
	for _, pr := range prs {
		if pr.GetHead().GetRef() == branch {
			return pr, nil
		}
	}
	return nil, nil
}

func (g *GitHub) create(ctx context.Context, p models.Project, t models.Task, owner, name, branch string, c models.PRContent) (*github.PullRequest, error) {
	base := models.DefaultBranch
	if p.Repo != nil && p.Repo.DefaultBranch != "" {
		base = p.Repo.DefaultBranch
	}
	pr, _, err := g.client.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: github.String(prTitle(t)), Head: github.String(branch), Base: github.String(base),
		Body: github.String(PRBody(t, c)), Draft: github.Bool(p.Settings.PRDraft), MaintainerCanModify: github.Bool(true)})
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity &&
			strings.Contains(strings.ToLower(fmt.Sprint(er.Errors, er.Message)), "already exists") {
			// Opened meanwhile (or by a run that crashed after the request).
			if found, ferr := g.find(ctx, owner, name, branch); ferr == nil && found != nil {
				return found, nil
			}
		}
		return nil, g.redact(fmt.Errorf("open pull request for %s: %w", branch, err))
	}
	if len(p.Settings.PRReviewers) > 0 {
		if _, _, err := g.client.PullRequests.RequestReviewers(ctx, owner, name, pr.GetNumber(),
			github.ReviewersRequest{Reviewers: p.Settings.PRReviewers}); err != nil {
			g.log.Warn("request pull request reviewers", "task_id", t.ID, "pr", pr.GetNumber(), "err", g.redact(err))
		}
	}
	if len(p.Settings.PRLabels) > 0 {
		if _, _, err := g.client.Issues.AddLabelsToIssue(ctx, owner, name, pr.GetNumber(), p.Settings.PRLabels); err != nil {
			g.log.Warn("label pull request", "task_id", t.ID, "pr", pr.GetNumber(), "err", g.redact(err))
		}
	}
	return pr, nil
}

func prTitle(t models.Task) string {
	title := strings.TrimSpace(strings.ReplaceAll(t.Title, "\n", " "))
	if len(title) > 200 {
		title = title[:200]
	}
	return title + " (" + t.ID + ")"
}

// PRBody is a pull request's description: the task, the agent's summary,
// the files changed and the checks that passed, and the task's id.
func PRBody(t models.Task, c models.PRContent) string {
	var b strings.Builder
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	if s := strings.TrimSpace(c.Summary); s != "" {
		b.WriteString("### What was done\n\n" + s + "\n\n")
	}
	if len(c.Files) > 0 {
		b.WriteString("### Files changed\n\n")
		for i, f := range c.Files {
			if i == 100 {
				fmt.Fprintf(&b, "- … and %d more\n", len(c.Files)-100)
				break
			}
			b.WriteString("- `" + f + "`\n")
		}
		b.WriteString("\n")
	}
	if s := strings.TrimSpace(c.Checks); s != "" {
		b.WriteString("### Checks\n\n" + s + "\n\n")
	}
	fmt.Fprintf(&b, "---\nOpened by agentqueued for task `%s`. Merging this pull request completes the task.\n", t.ID)
	body := b.String()
	if len(body) > 60000 {
		body = body[:60000] + "\n…\n"
	}
	return body
}

// redact removes the token from an error's text, should anything have
// echoed it.
func (g *GitHub) redact(err error) error {
	if err == nil || g.cfg.Token == "" || !strings.Contains(err.Error(), g.cfg.Token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), g.cfg.Token, "<token>"))
}

// ValidWebhookSignature reports whether sig (X-Hub-Signature-256,
// "sha256=<hex>") is the HMAC-SHA256 of body with secret.
func ValidWebhookSignature(secret, sig string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok || secret == "" {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// RateLimited is the error of a request GitHub refused for its rate
// limits: nothing should be asked of it before RetryAt.
type RateLimited struct {
	Until  time.Time
	Reason string
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("github rate limit (%s) until %s", e.Reason, e.Until.Format(time.RFC3339))
}

// RetryAt is when GitHub may be asked again.
func (e *RateLimited) RetryAt() time.Time { return e.Until }

// limited turns go-github's rate-limit errors into RateLimited.
func limited(err error, now time.Time) error {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return &RateLimited{Until: rl.Rate.Reset.Time, Reason: "primary"}
	}
	var ab *github.AbuseRateLimitError
	if errors.As(err, &ab) {
		wait := time.Minute
		if ab.RetryAfter != nil {
			wait = *ab.RetryAfter
		}
		return &RateLimited{Until: now.Add(wait), Reason: "secondary"}
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusTooManyRequests {
		wait := time.Minute
		if s := er.Response.Header.Get("Retry-After"); s != "" {
			if d, perr := time.ParseDuration(s + "s"); perr == nil {
				wait = d
			}
		}
		return &RateLimited{Until: now.Add(wait), Reason: "429"}
	}
	return err
}

// notModified reports whether err is GitHub's answer 304 to a conditional
// request (go-github surfaces it as an *ErrorResponse).
func notModified(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotModified
}

// Check reads a pull request with conditional requests (304s cost nothing
// against the rate limit); with reviews, an open pull request's reviews too.
func (g *GitHub) Check(ctx context.Context, pr models.PullRequest, reviews bool) (models.PRCheck, error) {
	out := models.PRCheck{State: pr.State, ETag: pr.ETag, ReviewsETag: pr.ReviewsETag, LastReviewID: pr.LastReviewID}
	req, err := g.client.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/pulls/%d", pr.Owner, pr.Repo, pr.Number), nil)
	if err != nil {
		return out, err
	}
	if pr.ETag != "" {
		req.Header.Set("If-None-Match", pr.ETag)
	}
	var got github.PullRequest
	resp, err := g.client.Do(ctx, req, &got)
	switch {
	case notModified(err):
		out.NotModified = true
	case err != nil:
		return out, g.redact(fmt.Errorf("check pull request %s/%s#%d: %w", pr.Owner, pr.Repo, pr.Number, limited(err, g.cfg.Clock.Now())))
	default:
		out.ETag = resp.Header.Get("ETag")
		switch {
		case got.GetMerged():
			out.State = models.PRMerged
		case got.GetState() == "closed":
			out.State = models.PRClosed
		default:
			out.State = models.PROpen
		}
	}
	if !reviews || out.State != models.PROpen {
		return out, nil
	}
	rreq, err := g.client.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/pulls/%d/reviews?per_page=100", pr.Owner, pr.Repo, pr.Number), nil)
	if err != nil {
		return out, err
	}
	if pr.ReviewsETag != "" {
		rreq.Header.Set("If-None-Match", pr.ReviewsETag)
	}
	var list []*github.PullRequestReview
	resp, err = g.client.Do(ctx, rreq, &list)
	switch {
	case notModified(err):
		return out, nil
	case err != nil:
		return out, g.redact(fmt.Errorf("reviews of pull request %s/%s#%d: %w", pr.Owner, pr.Repo, pr.Number, limited(err, g.cfg.Clock.Now())))
	}
	out.ReviewsETag = resp.Header.Get("ETag")
	for _, r := range list {
		if r.GetID() <= pr.LastReviewID {
			continue
		}
		out.LastReviewID = max(out.LastReviewID, r.GetID())
		if r.GetState() == "CHANGES_REQUESTED" {
			out.ChangesRequested = append(out.ChangesRequested, models.Feedback{Source: "github:" + r.GetUser().GetLogin(),
				Verdict: models.VerdictReject, Text: strings.TrimSpace(r.GetBody())})
		}
	}
	return out, nil
}

// Merge merges a pull request through the API (a merge commit).
func (g *GitHub) Merge(ctx context.Context, pr models.PullRequest) error {
	if err := g.ws.fenced(ctx); err != nil {
		return fmt.Errorf("merge pull request %s: %w", pr.URL, err)
	}
	_, _, err := g.client.PullRequests.Merge(ctx, pr.Owner, pr.Repo, pr.Number, "", &github.PullRequestOptions{MergeMethod: "merge"})
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && (er.Response.StatusCode == http.StatusMethodNotAllowed || er.Response.StatusCode == http.StatusConflict) {
			return models.Errorf(models.CodeConflict, "pull request %s cannot be merged now: %s", pr.URL, er.Message)
		}
		return g.redact(fmt.Errorf("merge pull request %s: %w", pr.URL, limited(err, g.cfg.Clock.Now())))
	}
	return nil
}

// DeleteBranch deletes a merged pull request's branch on GitHub.
func (g *GitHub) DeleteBranch(ctx context.Context, pr models.PullRequest) error {
	if err := g.ws.fenced(ctx); err != nil {
		return fmt.Errorf("delete branch %s of %s/%s: %w", pr.Branch, pr.Owner, pr.Repo, err)
	}
	_, err := g.client.Git.DeleteRef(ctx, pr.Owner, pr.Repo, "heads/"+pr.Branch)
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity {
		return nil // gone already
	}
	if err != nil {
		return g.redact(fmt.Errorf("delete branch %s of %s/%s: %w", pr.Branch, pr.Owner, pr.Repo, limited(err, g.cfg.Clock.Now())))
	}
	return nil
}

// maxWebhookBody caps a webhook delivery's body.
const maxWebhookBody = 10 << 20

// WebhookHandler serves GitHub's webhook deliveries. A delivery whose
// X-Hub-Signature-256 is not the HMAC of its body with secret is refused
// (401) and logged; pull_request and pull_request_review deliveries poke
// the check of their pull request (whose state is read from the API, never
// taken from the delivery); ping and other events are acknowledged.
func WebhookHandler(secret string, log *slog.Logger, poke func(owner, repo string, number int)) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		event, delivery := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
		if !ValidWebhookSignature(secret, r.Header.Get("X-Hub-Signature-256"), body) {
			log.Warn("github webhook refused: bad signature", "event", event, "delivery", delivery, "remote", r.RemoteAddr)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		switch event {
		case "pull_request", "pull_request_review":
		default:
			w.WriteHeader(http.StatusNoContent)
			return
		}
		var p struct {
			Number      int `json:"number"`
			PullRequest struct {
				Number int `json:"number"`
			} `json:"pull_request"`
			Repository struct {
				Name  string `json:"name"`
				Owner struct {
					Login string `json:"login"`
				} `json:"owner"`
			} `json:"repository"`
		}
		payload := body
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			// GitHub's "form" content type: the JSON is the payload field
			// (the signature covers the raw body, checked above).
			form, err := url.ParseQuery(string(body))
			if err != nil {
				http.Error(w, "payload: bad form", http.StatusBadRequest)
				return
			}
			payload = []byte(form.Get("payload"))
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			http.Error(w, "payload: not JSON", http.StatusBadRequest)
			return
		}
		n := p.PullRequest.Number
		if n == 0 {
			n = p.Number
		}
		if n <= 0 || p.Repository.Name == "" || p.Repository.Owner.Login == "" {
			http.Error(w, "payload: no pull request or repository", http.StatusBadRequest)
			return
		}
		log.Info("github webhook", "event", event, "delivery", delivery, "repo", p.Repository.Owner.Login+"/"+p.Repository.Name, "pr", n)
		poke(p.Repository.Owner.Login, p.Repository.Name, n)
		w.WriteHeader(http.StatusNoContent)
	})
}
