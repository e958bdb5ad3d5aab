// Package githubtest is a fake GitHub for tests: an HTTP server on
// 127.0.0.1 that speaks GitHub's REST protocol for pull requests, reviews,
// labels, refs and rate limits, and serves real git over smart HTTP, so
// that the real go-github client and the real git CLI can be tested
// against it end to end.
//
// # Story
//
// A test starts a server and creates a repository:
//
//	srv := githubtest.New(githubtest.Options{Token: "tok", Logf: t.Logf})
//	defer srv.Close()
//	cloneURL := srv.CreateRepo("acme", "widgets", "main")
//	gh, _ := github.NewClient(nil).WithAuthToken("tok").
//		WithEnterpriseURLs(srv.URL()+"/api/v3/", srv.URL()+"/api/uploads/")
//
// (WithEnterpriseURLs appends "api/v3/" only when the URL does not already
// end with it, so srv.URL() alone works too.) The code under test pushes a
// branch to cloneURL with git, authenticating with the token, e.g. only
// through the environment:
//
//	GIT_CONFIG_COUNT=1
//	GIT_CONFIG_KEY_0=http.extraHeader
//	GIT_CONFIG_VALUE_0=Authorization: Basic base64("x-access-token:tok")
//
// then opens a pull request through the API and watches it. The test plays
// the people on GitHub with AddReview, MergePR and ClosePR, may deliver
// webhooks with Deliver, PullRequestEvent and PullRequestReviewEvent, makes
// GitHub refuse requests with RateLimitNext, and checks what happened with
// PRs, DeletedBranches, RepoDir, Requests, Counts and GitRequests.
//
// # Repositories and git
//
// Every repository is a real bare repository (RepoDir) served by
// git-http-backend through net/http/cgi, with receive-pack enabled. Every
// git request needs the token: Basic credentials whose password is the
// token (any user name, as on GitHub; git sends "x-access-token:<token>"),
// or "Bearer <token>" / "token <token>". Otherwise the answer is 401 with
// WWW-Authenticate: Basic realm="GitHub", which makes git ask its
// credential helpers. GitRequests records whether each request carried an
// Authorization header and whether it was the token, never the header.
//
// Pull requests follow their branches as on GitHub: a push to the head
// branch of an open pull request moves head.sha and updated_at, and
// deleting the head branch (through the API or git push --delete) closes
// it. Merges, through the API or MergePR, write real commits: "merge" a
// two-parent merge commit, "squash" a one-parent commit, "rebase" only
// when it is a fast-forward (otherwise 405); the base branch moves with a
// compare-and-swap and merge_commit_sha is the new commit.
//
// # API
//
// With Options.Scopes set, every authorized answer carries X-OAuth-Scopes
// (the scopes joined by ", "), as GitHub answers for a classic token.
//
// Routes, under /api/v3:
//
//	GET    /rate_limit                               not counted, never limited
//	GET    /user                                     the token's user (Options.Login)
//	GET    /repos/{o}/{r}
//	GET    /repos/{o}/{r}/pulls                      state, head, base, sort, direction, per_page, page; Link headers
//	POST   /repos/{o}/{r}/pulls                      201; 422 as below
//	GET    /repos/{o}/{r}/pulls/{n}
//	PATCH  /repos/{o}/{r}/pulls/{n}                  title, body, state, base, maintainer_can_modify
//	GET    /repos/{o}/{r}/pulls/{n}/reviews
//	GET    /repos/{o}/{r}/pulls/{n}/merge            204 merged, 404 not
//	PUT    /repos/{o}/{r}/pulls/{n}/merge            200; 405 closed, draft or conflicting; 409 sha is not the head
//	GET    /repos/{o}/{r}/pulls/{n}/requested_reviewers
//	POST   /repos/{o}/{r}/pulls/{n}/requested_reviewers  201; 422 for the author
//	GET    /repos/{o}/{r}/issues/{n}/labels
//	POST   /repos/{o}/{r}/issues/{n}/labels          200; labels are created on the fly
//	DELETE /repos/{o}/{r}/git/refs/{ref}             204; 422 "Reference does not exist"
//
// Anything else is 404 {"message":"Not Found",...}; a missing or wrong
// token 401 {"message":"Bad credentials",...}. Bodies are GitHub's JSON:
// nullable fields are present as null, single pull requests are the full
// "pull-request" object while lists (and the request-reviewers answer) are
// "pull-request-simple", without merged, mergeable, mergeable_state,
// merged_by, commits, additions, deletions, changed_files; so with
// go-github, PullRequest.Merged is nil in List results: use Get, IsMerged
// or merged_at. Creating a pull request fails with 422 "Validation
// Failed" and one error: code "custom" "A pull request already exists for
// owner:branch." when an open one has the same head and base; code
// "custom" "No commits between main and branch" when the head has no
// commit beyond the base; code "invalid" field "head" (or "base") when
// the branch does not exist; code "missing_field" for a missing title,
// head or base.
//
// # Conditional requests
//
// Every 200 answer to a GET carries a strong ETag (the quoted SHA-256 of
// the body); single pull requests also carry Last-Modified (updated_at). A
// request whose If-None-Match matches (weak or strong form, or "*"), or
// without If-None-Match whose If-Modified-Since is not before
// Last-Modified, is answered 304 with no body. As on GitHub, 304s do not
// count against the rate limit: their X-RateLimit-Remaining is unchanged.
//
// go-github v60 has no ETag support of its own: build the request with
// Client.NewRequest, set If-None-Match, and call Client.Do. It surfaces a
// 304 as an error: a *github.ErrorResponse whose Response.StatusCode is
// 304 and whose Message is empty, together with a non-nil *github.Response
// (resp.StatusCode 304, resp.Header with the ETag, resp.Rate from the
// headers); the value passed to Do is left untouched. Test for it with
// errors.As(err, &er) && er.Response.StatusCode == http.StatusNotModified
// before treating err as a failure. The new ETag of a 200 is
// resp.Header.Get("ETag").
//
// # Rate limits
//
// Every API answer carries X-RateLimit-Limit, -Remaining, -Used, -Reset
// (unix seconds) and -Resource: core, and X-GitHub-Request-Id. Each
// answered request except 304s, 401s, GET /rate_limit and rate-limit
// refusals uses one of Options.RateLimit per hour; the window starts at
// the first request and resets an hour later by Options.Clock. Once it is
// used up, requests are answered 403 with X-RateLimit-Remaining: 0 until
// the reset (conditional ones too). RateLimitNext injects refusals. How
// go-github v60 surfaces them:
//
//   - Primary (403 with X-RateLimit-Remaining: 0): *github.RateLimitError
//     with Rate.Remaining 0 and Rate.Reset from X-RateLimit-Reset. Any
//     answer with X-RateLimit-Remaining: 0, a successful one too (the last
//     request of a window), makes the client refuse every later request of
//     the core category locally, without sending it, with a
//     *github.RateLimitError whose Message ends "not making remote
//     request." and whose Response is a synthetic 403, until Rate.Reset
//     by the real clock (time.Now, not Options.Clock). RateLimit.Get
//     bypasses that check and refreshes the client's view.
//   - Secondary (403 with Retry-After and a documentation_url ending
//     "secondary-rate-limits"): *github.AbuseRateLimitError with
//     RetryAfter set. The client then refuses every request locally with
//     an *AbuseRateLimitError ("not making remote request.") until
//     time.Now()+RetryAfter.
//   - 429 with Retry-After: a plain *github.ErrorResponse with
//     Response.StatusCode 429; go-github v60 neither recognises it as a
//     rate limit nor refuses later requests: read Retry-After from
//     er.Response.Header yourself.
//
// Validation errors (422) are *github.ErrorResponse with Message
// "Validation Failed" and Errors[i].Code/Field/Message; other failures
// (404, 405, 409, 401) are *github.ErrorResponse with the status in
// Response.StatusCode and GitHub's message in Message. IsMerged turns the
// 404 into (false, nil).
//
// # Webhooks
//
// Deliver POSTs a payload the way GitHub's hookshot does, signed with
// X-Hub-Signature-256 (and the legacy X-Hub-Signature) when a secret is
// given; github.ValidatePayload and github.ParseWebHook accept it.
//
// # Not modelled
//
// Forks and cross-repository heads, teams, organisations, collaborators
// (any login may be asked to review), issues other than pull requests,
// comments, checks and statuses, auto-merge, branch protection, and the
// unauthenticated rate limit. mergeable is computed at once (GitHub may
// answer null first), merge_commit_sha is null until a merge (GitHub keeps
// a test merge commit), and there is only one token, whose user is
// Options.Login.
package githubtest
