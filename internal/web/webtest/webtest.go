// Package webtest drives the web dashboard in a real browser for tests:
// Debian's headless Chromium through chromedp. A test that cannot find
// Chromium skips with a message naming the install command, except under
// CI=true, where it fails (.ci/run installs Chromium).
package webtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumEnv names a Chromium binary to use instead of looking for one.
const ChromiumEnv = "AQ_TEST_CHROMIUM"

// InstallHint is how to install what the browser tests need.
const InstallHint = "apt-get install -y chromium"

// Chromium returns the path of the Chromium binary: $AQ_TEST_CHROMIUM, or
// chromium (or chromium-browser) on PATH, or /usr/bin/chromium. None
// found skips the test, or fails it under CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(ChromiumEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", ChromiumEnv, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	msg := "chromium not found (set " + ChromiumEnv + " or install it: " + InstallHint + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Flags are the switches Chromium starts with: headless, no sandbox (tests
// may run as root), and none of its background traffic (the machine may
// have no network).
var Flags = []chromedp.ExecAllocatorOption{
	chromedp.Flag("headless", true),
	chromedp.Flag("no-sandbox", true),
	chromedp.Flag("disable-gpu", true),
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("no-first-run", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.Flag("no-default-browser-check", true),
	chromedp.WindowSize(1024, 900),
}

// Browser is one Chromium started for a test, with one tab.
type Browser struct {
	t testing.TB
	// ctx is the tab's (Chromium lives until the test's end, so that a
	// failure's screenshot can be taken); parent bounds each action.
	ctx    context.Context
	parent context.Context
}

// Start starts Chromium with an empty profile for the test; parent bounds
// every action (a test's watchdog context). When the test has failed by
// its end, a screenshot of the tab and its HTML are written to the test's
// artifact directory (named in the log) before Chromium stops.
func Start(t *testing.T, parent context.Context) *Browser {
	t.Helper()
	bin := Chromium(t)
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir())}, Flags...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", bin, err)
	}
	b := &Browser{t: t, ctx: ctx, parent: parent}
	t.Cleanup(func() {
		if t.Failed() {
			b.Capture(t.ArtifactDir(), "failure")
		}
		cancelTab()
		cancelAlloc()
	})
	return b
}

// Context returns the tab's context, ended with the parent given to
// Start, for chromedp.Do and chromedp.Run; call the cancel function after.
func (b *Browser) Context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(b.ctx)
	stop := context.AfterFunc(b.parent, cancel)
	return ctx, func() { stop(); cancel() }
}

// Do runs actions in the tab and fails the test, naming what, on error.
func (b *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.Context()
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Text returns the text of the first element sel (a CSS selector) finds.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	ctx, cancel := b.Context()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// WaitFor waits, re-evaluating on every change of the page's DOM, until
// the JavaScript expression is true; what names it in the failure. Only
// the context given to Start bounds the wait: no timeout of its own.
func (b *Browser) WaitFor(what, expression string) {
	b.t.Helper()
	ctx, cancel := b.Context()
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expression,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
		if err == nil {
			return
		}
		if ctx.Err() == nil && navigated(err) {
			continue // the page changed under the poll: poll the new one
		}
		b.t.Fatalf("waiting for %s (%s): %v", what, expression, err)
	}
}

// navigated reports whether err is a poll's end by a navigation: the
// page it ran in is gone.
func navigated(err error) bool {
	msg := err.Error()
	for _, s := range []string{"Cannot find context", "Execution context was destroyed", "context was destroyed",
		"Inspected target navigated", "navigat"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// WaitText waits until the element sel finds contains text.
func (b *Browser) WaitText(sel, text string) {
	b.t.Helper()
	b.WaitFor(fmt.Sprintf("%q in %s", text, sel), fmt.Sprintf(
		"(function(){var e=document.querySelector(%q);return !!e && e.textContent.indexOf(%q) >= 0})()", sel, text))
}

// Capture writes a screenshot of the tab (name.png) and its HTML
// (name.html) to dir and logs where they are.
func (b *Browser) Capture(dir, name string) {
	b.t.Helper()
	ctx := b.ctx
	url, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.OuterHTML("html"))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG (any other quality is JPEG)
	if err != nil {
		b.t.Logf("no screenshot of the page: %v", err)
		return
	}
	name = strings.NewReplacer("/", "_", " ", "_").Replace(name)
	pngPath := filepath.Join(dir, name+".png")
	err = errors.Join(os.WriteFile(pngPath, png, 0o600), os.WriteFile(filepath.Join(dir, name+".html"), []byte(html), 0o600))
	if err != nil {
		b.t.Logf("write the page's screenshot: %v", err)
		return
	}
	b.t.Logf("screenshot of %s: %s (and its HTML beside it)", url, pngPath)
}
