package agent

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Aider runs aider on the prompt file, answering yes to its questions:
//
//	aider --message-file <PromptFile> --yes-always --no-stream --no-pretty
//	  --no-check-update --no-show-release-notes --analytics-disable
//	  --no-gitignore [--input-history-file <StateDir>/aider.input.history
//	  --chat-history-file <StateDir>/aider.chat.history.md] [--model M]
//	  [--read <StateDir>/conventions.md] [agent args…]
//
// Aider has no sessions, no MCP client, no permission modes and no
// allowed-tools list: those profile fields are ignored, and an aider agent
// reports through the `agentqueued agent` commands if at all. The system
// prompt suffix becomes conventions.md in the run's state directory, read
// with --read. --no-gitignore and the history files keep aider from adding
// .aider* to the checkout's .gitignore and its chat logs to the checkout (its
// repo-map cache .aider.tags.cache.v4 still lands there).
type Aider struct{}

// Type returns "aider".
func (Aider) Type() string { return "aider" }

// Invocation builds the aider command line and its conventions file.
func (Aider) Invocation(rc RunContext) (Invocation, error) {
	if rc.PromptFile == "" {
		return Invocation{}, errors.New("aider: no prompt file")
	}
	argv := []string{command(rc, "aider"), "--message-file", rc.PromptFile, "--yes-always", "--no-stream", "--no-pretty",
		"--no-check-update", "--no-show-release-notes", "--analytics-disable", "--no-gitignore"}
	if rc.StateDir != "" {
		argv = append(argv, "--input-history-file", filepath.Join(rc.StateDir, "aider.input.history"),
			"--chat-history-file", filepath.Join(rc.StateDir, "aider.chat.history.md"))
	}
	if m := rc.Profile.Model; m != "" {
		if err := checkFlagValue("model", m); err != nil {
			return Invocation{}, err
		}
		argv = append(argv, "--model", m)
	}
	var inv Invocation
	if s := rc.Profile.SystemPromptSuffix; s != "" {
		if rc.StateDir == "" {
			return Invocation{}, errors.New("aider: a system prompt suffix but no state directory for it")
		}
		inv.Files = map[string]string{"conventions.md": s}
		argv = append(argv, "--read", filepath.Join(rc.StateDir, "conventions.md"))
	}
	inv.Argv = append(argv, rc.Agent.Args...)
	return inv, nil
}

// NewParser reads aider's plain-text output.
func (Aider) NewParser(RunContext) Parser { return &aiderParser{} }

// aiderParser is the state of one run's output. Aider has no terminal
// event and exits 0 even when the LLM call failed, so End decides:
//   - a non-zero exit fails the run (setup problems);
//   - "Applied edit to …" or "Commit …" lines make a success whose summary
//     is those lines;
//   - else an LLM error text (rate limit, authentication, "did not conform",
//     …) fails it, a rate limit also being reported as one (no reset time:
//     aider prints none);
//   - else it succeeds with the summary "no edits applied".
//
// Usage: every "Tokens: …" line counts one LLM call (the counts are per
// message; only the Cost part has a session total), so the run's usage is
// their sum. "sent" includes the cache hits and writes, which are taken out
// of Input. Lines inside ``` fences are the model's text and are not read.
type aiderParser struct {
	usage     models.TokenUsage
	gate      usageGate
	edits     []string
	inFence   bool
	errText   string
	limitText string
	rawErr    string
	limited   bool
	usageCap  bool
	done      bool
}

var (
	aiderTokens = regexp.MustCompile(`^Tokens: ([\d.,]+[kKmM]?) sent(?:, ([\d.,]+[kKmM]?) cache write)?(?:, ([\d.,]+[kKmM]?) cache hit)?(?:, ([\d.,]+[kKmM]?) cached)?, ([\d.,]+[kKmM]?) received\.`)
	// aiderOldTokens is the mid-2024 usage line.
	aiderOldTokens = regexp.MustCompile(`^([\d.,]+[kKmM]?) prompt tokens, ([\d.,]+[kKmM]?) completion tokens`)
	aiderCommit    = regexp.MustCompile(`^Commit [0-9a-f]{7,40} \S`)
	// aiderRawError is an exception aider prints as is ("litellm.RateLimitError: …").
	aiderRawError = regexp.MustCompile(`^(?:litellm\.|[\w.]*(?:Error|Exception):)`)
)

// aiderErrors are aider's own failure texts.
var aiderErrors = []string{"The API provider is not able to authenticate you", "did not conform to the edit format",
	"Exception while updating files", "possibly exhausted context window", "reflections allowed, stopping",
	"The API provider's servers are down", "The API provider refused the request", "API provider is not available"}

// Line reads one line of aider's output.
func (p *aiderParser) Line(line []byte) []Event {
	if p.done {
		return nil
	}
	s := strings.TrimSpace(string(line))
	s = strings.TrimSpace(strings.TrimPrefix(s, ">")) // the chat history file quotes tool output
	if strings.HasPrefix(s, "```") {
		p.inFence = !p.inFence
		return nil
	}
	if p.inFence || s == "" {
		return nil
	}
	switch {
	case strings.HasPrefix(s, "Tokens: "):
		if m := aiderTokens.FindStringSubmatch(s); m != nil {
			write, hit := aiderCount(m[2]), aiderCount(m[3])+aiderCount(m[4])
			return p.add(models.TokenUsage{Input: max(aiderCount(m[1])-write-hit, 0), Output: aiderCount(m[5]),
				CacheRead: hit, CacheWrite: write})
		}
	case aiderOldTokens.MatchString(s):
		m := aiderOldTokens.FindStringSubmatch(s)
		return p.add(models.TokenUsage{Input: aiderCount(m[1]), Output: aiderCount(m[2])})
	case strings.HasPrefix(s, "Applied edit to "), aiderCommit.MatchString(s):
		p.edits = append(p.edits, s)
	case strings.Contains(s, "The API provider has rate limited you"):
		p.limited = true
		if p.limitText == "" {
			p.limitText = s
		}
	case aiderRawError.MatchString(s):
		if limited, usageCap := limitInText(s); limited {
			p.limited, p.usageCap = true, p.usageCap || usageCap
		}
		p.rawErr = s
	default:
		for _, e := range aiderErrors {
			if strings.Contains(s, e) && p.errText == "" {
				p.errText = s // the first says most; later ones follow from it
			}
		}
	}
	return nil
}

func (p *aiderParser) add(u models.TokenUsage) []Event {
	p.usage = addUsage(p.usage, u)
	return p.gate.next(p.usage)
}

// aiderCount reads a token count as aider prints it: 456, 5,244, 3.0k, 1.2M.
func aiderCount(s string) int64 {
	if s == "" {
		return 0
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, s = 1e3, s[:len(s)-1]
	case 'm', 'M':
		mult, s = 1e6, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil || v < 0 || v*mult > 1e15 {
		return 0
	}
	return int64(math.Round(v * mult))
}

// End decides the run from the exit code and what aider printed.
func (p *aiderParser) End(exitCode int) []Event {
	if p.done {
		return nil
	}
	p.done = true
	errText := p.errText
	if p.limited && p.limitText != "" {
		errText = p.limitText // the limit is why nothing was done
	}
	if errText == "" {
		errText = p.rawErr
	}
	if exitCode != 0 {
		msg := fmt.Sprintf("aider exited with status %d", exitCode)
		if errText != "" {
			msg += ": " + errText
		}
		return []Event{{Kind: EventResult, IsError: true, Error: msg}}
	}
	if len(p.edits) > 0 {
		return []Event{{Kind: EventResult, Summary: strings.Join(p.edits, "\n")}}
	}
	if errText == "" {
		return []Event{{Kind: EventResult, Summary: "no edits applied"}}
	}
	var evs []Event
	if p.limited {
		evs = append(evs, Event{Kind: EventRateLimit, UsageCap: p.usageCap, Error: errText})
	}
	return append(evs, Event{Kind: EventResult, IsError: true, Error: errText})
}
