package githubtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"

	"github.com/google/go-github/v60/github"
)

// Deliver POSTs a webhook delivery to url as GitHub does: the JSON of
// payload (a []byte or json.RawMessage is sent as is) with headers
// X-GitHub-Event: event, X-GitHub-Delivery: a random UUID,
// X-GitHub-Hook-ID, X-GitHub-Hook-Installation-Target-Type/-ID,
// X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body with secret>
// and the legacy X-Hub-Signature: sha1=<...> (both omitted when secret is
// empty), Content-Type: application/json and User-Agent:
// GitHub-Hookshot/<hex>. It gives up after 10 s, as GitHub does. The
// caller closes the response body.
func (s *Server) Deliver(ctx context.Context, url, secret, event string, payload any) (*http.Response, error) {
	var body []byte
	switch p := payload.(type) {
	case []byte:
		body = p
	case json.RawMessage:
		body = p
	default:
		var err error
		if body, err = marshal(payload); err != nil {
			return nil, fmt.Errorf("githubtest: encoding payload: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/7c5e3f1")
	h.Set("Accept", "*/*")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", newUUID())
	h.Set("X-GitHub-Hook-ID", "1")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "1")
	if secret != "" {
		h.Set("X-Hub-Signature", "sha1="+mac(sha1.New, secret, body))
		h.Set("X-Hub-Signature-256", "sha256="+mac(sha256.New, secret, body))
	}
	s.logf("deliver %s to %s", event, url)
	return s.hooks.Do(req)
}

func mac(h func() hash.Hash, secret string, body []byte) string {
	m := hmac.New(h, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// PullRequestEvent builds the payload of a "pull_request" delivery:
// action (opened, closed, reopened, synchronize, ...), number,
// pull_request, repository (the base repository), and sender (the author;
// the merger for a merged "closed"). For "synchronize", after is the head
// commit. Its dynamic type is *github.PullRequestEvent; pr usually comes
// from Server.PRs. A merge is "closed" with pull_request.merged true.
func PullRequestEvent(action string, pr *github.PullRequest) any {
	ev := &github.PullRequestEvent{
		Action:      github.String(action),
		Number:      github.Int(pr.GetNumber()),
		PullRequest: pr,
		Repo:        pr.GetBase().GetRepo(),
		Sender:      pr.GetUser(),
	}
	if action == "closed" && pr.GetMerged() && pr.MergedBy != nil {
		ev.Sender = pr.MergedBy
	}
	if action == "synchronize" {
		ev.After = github.String(pr.GetHead().GetSHA())
	}
	return ev
}

// PullRequestReviewEvent builds the payload of a "pull_request_review"
// delivery: action (submitted, edited, dismissed), review, pull_request,
// repository and sender (the reviewer). Its dynamic type is
// *github.PullRequestReviewEvent.
func PullRequestReviewEvent(action string, pr *github.PullRequest, review *github.PullRequestReview) any {
	return &github.PullRequestReviewEvent{
		Action:      github.String(action),
		Review:      review,
		PullRequest: pr,
		Repo:        pr.GetBase().GetRepo(),
		Sender:      review.GetUser(),
	}
}
