// Package gitserve serves one git repository per request over git's smart
// HTTP protocol, so that a machine with no other access to a project can
// fetch it and push a branch back through the daemon.
//
// # Story
//
// A runner clones a project from the daemon, its agent works, and the runner
// pushes the task branch back:
//
//	git clone http://127.0.0.1:7777/runner/v1/git/RUN/repo.git
//	git push origin aq/T-1-fix
//
// Each of git's requests reaches a Handler mounted at that repository's URL.
// The handler knows nothing of runs, tokens or projects: it asks the
// caller's Config.Resolve, with the request, which repository it addresses
// and what it may do there (a Target: the directory, whether it may fetch,
// and the exact branches it may push), then runs git on that directory:
//
//	git upload-pack  --stateless-rpc [--advertise-refs] .   (fetch, clone)
//	git receive-pack --stateless-rpc [--advertise-refs] .   (push)
//
// with the request's body on git's standard input and git's output streamed
// back, as Gitea does, rather than through git-http-backend and
// net/http/cgi: that package refuses chunked request bodies, and git sends
// every push above http.postBuffer (1 MiB) chunked.
//
// # Routes
//
// The handler routes on the end of the request's path; whatever comes
// before it is the mount, which Resolve interprets (a ServeMux pattern such
// as "/runner/v1/git/{run}/repo.git/" gives Resolve r.PathValue("run")):
//
//	GET  {mount}/info/refs?service=git-upload-pack    advertisement of refs for a fetch
//	GET  {mount}/info/refs?service=git-receive-pack   advertisement of refs for a push
//	POST {mount}/git-upload-pack                      a fetch's negotiation and its pack
//	POST {mount}/git-receive-pack                     a push's commands and pack
//
// Anything else is 404 (git's dumb HTTP protocol is not served: no
// info/refs without a service, no objects/, no HEAD), a known path with
// another method 405, and a POST whose Content-Type is not
// application/x-git-<service>-request 415. Answers carry git's content
// types (application/x-git-<service>-advertisement and -result) and are
// never cached (Cache-Control: no-cache, as git-http-backend sends).
//
// # Who may do what
//
// Resolve decides. An error it returns is answered by what it says:
// ErrUnauthorized is 401 (with a Basic challenge, which makes git ask its
// credential helpers), ErrForbidden 403, ErrNotFound 404, a *models.Error
// its code's status with its message, anything else 500 "internal error".
// Then:
//
//   - fetching (both git-upload-pack routes) needs Target.Read;
//   - pushing (both git-receive-pack routes) needs a non-empty Target.Push.
//     Before the push reaches git, the handler reads its commands — the
//     pkt-lines that open the body, before the pack — and refuses the whole
//     push with 403 when any command deletes a ref, pushes a tag, or
//     updates a ref that is not in Target.Push (full names, and only under
//     refs/heads/); git never starts, so nothing is written. An update of
//     a granted branch may be a forced one. A body whose commands are not
//     well-formed pkt-lines is 400, also before git starts. The rest of the
//     body, the pack, is then streamed to git unread.
//
// # Protocol v2, compression and size
//
// A Git-Protocol header (git's protocol v2 for fetches) reaches git as
// GIT_PROTOCOL only when it is a list of key=value pairs of letters and
// digits joined by ':' (Gitea's check); otherwise it is ignored and git
// speaks version 0. In version 2 the advertisement of git-upload-pack has
// no "# service=" preamble, as git-http-backend answers.
//
// git gzips a fetch's negotiation when it is larger than 1 kB; the handler
// inflates a request whose Content-Encoding is gzip (any request; other
// encodings but identity are 415) and gives git the plain body. Limits count
// the inflated bytes: a fetch's negotiation is read whole before git starts
// and may be at most Config.MaxFetchBody (10 MiB by default, git's own
// GIT_HTTP_MAX_REQUEST_BUFFER); a push is streamed, of any length and
// chunked or not, up to Config.MaxPushBody (1 GiB by default). Beyond
// either the answer is 413; a push that exceeds its limit, or whose body
// breaks off, has its git killed before git sees the end of its input, so
// no ref moves.
//
// # git's process and environment
//
// git runs through internal/proc, in its own process group: when the
// request's context ends (the client went away) or Config.Timeout (one hour
// by default, measured on Config.Clock) passes, the whole group is killed,
// pack-objects and index-pack with it. A request out of time that was not
// answered yet is answered 408 while its body was still arriving, else 503. Its environment is built, not inherited: PATH, LANG,
// LC_*, TZ and TMPDIR from the daemon's, HOME set to Config.Home
// (os.DevNull by default, where no configuration can be), no system or
// global configuration (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null),
// no prompt. Command-line settings, which outrank the repository's own
// configuration, turn hooks and fsmonitor off (nothing in a repository's
// .git runs with the daemon's rights), check the objects of every push
// (receive.fsckObjects), refuse deletions (receive.denyDeletes), allow forced
// updates (receive.denyNonFastForwards=false: the ref check above is the
// restriction), do not advertise push options, and do not run `git gc
// --auto` after a push (receive.autogc=false: it would outlive the request
// in the background; the daemon's own git commands keep the repository
// packed).
//
// The repository may be bare or not. In a non-bare one git keeps
// receive.denyCurrentBranch=refuse: a push to a branch that is checked out
// there (in its work tree or one of its worktrees) is refused by git itself
// ("branch is currently checked out"), and one to any other branch is
// accepted; the daemon pushes task branches that no checkout of its own
// holds.
//
// Nothing the handler tells the client names a file-system path: its
// errors are fixed sentences (or a *models.Error's message from Resolve),
// and what git printed on its standard error goes to Config.Logger. What
// git says inside the protocol (a push's report, its side-band messages)
// reaches the client as git says it.
package gitserve
