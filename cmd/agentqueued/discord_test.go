package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Discord ids of the end-to-end test.
const (
	e2eControl = "310000000000000001"
	e2eProject = "310000000000000002"
	e2eAlice   = "410000000000000001"
)

// askingAgent asks which colour to use, waits for the answer, writes it
// down and completes with it.
const askingAgent = `#!/bin/sh
set -eu
cat > /dev/null
"$PAINTER_BIN" agent progress "looking at the button"
colour=$("$PAINTER_BIN" agent ask "Which colour should the button be?")
echo "button: $colour" > button.txt
"$PAINTER_BIN" agent complete --summary "Painted the button $colour." --files button.txt
`

// TestTaskThroughDiscord drives one task from a phone's point of view: it
// is added with /task add, its agent asks a question that is answered
// through the Answer button's modal, and it completes. What a person reads
// in the project's channel and the task's thread is compared with golden
// files.
// stillClock is a clock that stands still, for the fake Discord's
// interaction deadlines: a loaded machine cannot make an answer late here.
// The bot's own deadlines are tested on injected clocks in
// internal/discord.
func stillClock() *clocktest.Fake { return clocktest.New(time.Now()) }

func TestTaskThroughDiscord(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	fake := discordtest.New(discordtest.Options{Token: "e2e-token", Clock: stillClock(), Channels: []string{e2eControl, e2eProject}})
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", askingAgent)
	cfg := writeFile(t, dir, "config.yaml", `
discord:
  token: e2e-token
  guild_id: "`+discordtest.DefaultGuildID+`"
  control_channel_id: "`+e2eControl+`"
  authorized_users: ["`+e2eAlice+`"]
  api_base_url: `+fake.URL()+`
agents:
  - name: painter
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {PAINTER_BIN: "`+bin+`"}
`)
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	ctx := d.watch.Context()
	if err := fake.WaitFor(ctx, func() bool { return len(fake.Commands()) > 0 }); err != nil {
		t.Fatalf("no commands registered: %v\n%s", err, d.logs)
	}

	command := func(channel string, data discordgo.ApplicationCommandInteractionData) string {
		t.Helper()
		i := fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommand, ChannelID: channel,
			Member: &discordgo.Member{User: &discordgo.User{ID: e2eAlice, Username: "alice"}}, Data: data})
		rs, err := i.Wait(ctx, 1)
		if err != nil {
			t.Fatalf("/%s: %v", data.Name, err)
		}
		if rs[0].Type == discordgo.InteractionResponseDeferredChannelMessageWithSource {
			rs, err = i.Wait(ctx, 2)
			if err != nil {
				t.Fatalf("/%s: %v", data.Name, err)
			}
		}
		r := rs[len(rs)-1]
		if r.Message != nil {
			return r.Message.Content
		}
		return r.Data.Content
	}
	opt := func(name string, v any, typ discordgo.ApplicationCommandOptionType) *discordgo.ApplicationCommandInteractionDataOption {
		return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: typ, Value: v}
	}
	sub := func(name string, opts ...*discordgo.ApplicationCommandInteractionDataOption) []*discordgo.ApplicationCommandInteractionDataOption {
		return []*discordgo.ApplicationCommandInteractionDataOption{{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand, Options: opts}}
	}
	out := command(e2eControl, discordgo.ApplicationCommandInteractionData{Name: "project", Options: sub("create",
		opt("id", "shop", discordgo.ApplicationCommandOptionString), opt("name", "Shop", discordgo.ApplicationCommandOptionString),
		opt("channel", e2eProject, discordgo.ApplicationCommandOptionChannel))})
	if !strings.Contains(out, "Created project `shop`") {
		t.Fatalf("/project create: %q\n%s", out, d.logs)
	}
	out = command(e2eProject, discordgo.ApplicationCommandInteractionData{Name: "task", Options: sub("add",
		opt("title", "Paint the buy button", discordgo.ApplicationCommandOptionString))})
	m := regexp.MustCompile("Added `([a-z0-9-]+)`").FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("/task add: %q", out)
	}
	taskID := m[1]

	// The question arrives in the task's thread with an Answer button.
	var thread string
	var asked *discordgo.Message
	err := fake.WaitFor(ctx, func() bool {
		for _, th := range fake.Threads() {
			if strings.HasPrefix(th.Name, taskID) {
				thread = th.ID
			}
		}
		for _, msg := range fake.Messages(thread) {
			if strings.Contains(msg.Content, "Which colour") {
				asked = msg
			}
		}
		return asked != nil
	})
	if err != nil {
		t.Fatalf("no question in the thread: %v\n%s", err, d.logs)
	}
	var answerID string
	for _, row := range asked.Components {
		for _, c := range row.(*discordgo.ActionsRow).Components {
			if b := c.(*discordgo.Button); b.Label == "Answer" {
				answerID = b.CustomID
			}
		}
	}
	press := fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionMessageComponent, ChannelID: thread,
		Member:  &discordgo.Member{User: &discordgo.User{ID: e2eAlice}},
		Message: &discordgo.Message{ID: asked.ID, ChannelID: thread},
		Data:    discordgo.MessageComponentInteractionData{CustomID: answerID, ComponentType: discordgo.ButtonComponent}})
	rs, err := press.Wait(ctx, 1)
	if err != nil || rs[0].Type != discordgo.InteractionResponseModal {
		t.Fatalf("Answer: %+v, %v", rs, err)
	}
	submit := fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionModalSubmit, ChannelID: thread,
		Member: &discordgo.Member{User: &discordgo.User{ID: e2eAlice}},
		Data: discordgo.ModalSubmitInteractionData{CustomID: rs[0].Data.CustomID, Components: []discordgo.MessageComponent{
			&discordgo.ActionsRow{Components: []discordgo.MessageComponent{&discordgo.TextInput{CustomID: "text", Value: "green"}}}}}})
	if _, err := submit.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// The task completes; its result goes to the thread.
	err = fake.WaitFor(ctx, func() bool {
		for _, msg := range fake.Messages(thread) {
			if strings.Contains(msg.Content, "Painted the button green.") {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no result in the thread: %v\n%s", err, d.logs)
	}
	if err := fake.WaitFor(ctx, func() bool { return strings.Contains(transcript(fake, e2eProject, taskID, thread), "completed") }); err != nil {
		t.Fatalf("no completion notice: %v", err)
	}
	golden(t, "testdata/discord-channel.golden", transcript(fake, e2eProject, taskID, thread))
	golden(t, "testdata/discord-thread.golden", transcript(fake, thread, taskID, thread))
}

// transcript is what a person reads in a channel: its messages with their
// buttons, with the ids of this run replaced by stable names.
func transcript(fake *discordtest.Server, channel, taskID, thread string) string {
	var b strings.Builder
	for _, m := range fake.Messages(channel) {
		if m.Flags&discordgo.MessageFlagsEphemeral != 0 || m.InteractionMetadata != nil {
			continue // answers to interactions are checked where they are made
		}
		who := "bot"
		if m.Author != nil && m.Author.ID == e2eAlice {
			who = "alice"
		}
		b.WriteString("[" + who + "] " + m.Content + "\n")
		for _, row := range m.Components {
			r, ok := row.(*discordgo.ActionsRow)
			if !ok {
				continue
			}
			var labels []string
			for _, c := range r.Components {
				if btn, ok := c.(*discordgo.Button); ok {
					labels = append(labels, "("+btn.Label+")")
				}
			}
			b.WriteString("    " + strings.Join(labels, " ") + "\n")
		}
	}
	s := strings.ReplaceAll(b.String(), taskID, "<task>")
	s = strings.ReplaceAll(s, thread, "<thread>")
	return regexp.MustCompile(`#\d+\b`).ReplaceAllString(s, "#<n>")
}

// golden compares got with a golden file (rewritten with -update).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// TestDiscordStartLogs checks what the daemon says about Discord at start:
// how to enable it without a token, and that nobody may act without users.
func TestDiscordStartLogs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	if !strings.Contains(d.logs.String(), "discord disabled: set discord.token") {
		t.Errorf("headless start logs:\n%s", d.logs)
	}
	fake := discordtest.New(discordtest.Options{Token: "e2e-token", Clock: stillClock(), Channels: []string{e2eControl}})
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", `
discord:
  token: e2e-token
  guild_id: "`+discordtest.DefaultGuildID+`"
  control_channel_id: "`+e2eControl+`"
  api_base_url: `+fake.URL()+`
`)
	d = startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	if !strings.Contains(d.logs.String(), "discord: nobody may act") {
		t.Errorf("start without users logs:\n%s", d.logs)
	}
	ctx := d.watch.Context()
	// Nobody may act: even a command from someone gets a refusal.
	if err := fake.WaitFor(ctx, func() bool { return len(fake.Commands()) > 0 }); err != nil {
		t.Fatal(err)
	}
	i := fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommand, ChannelID: e2eControl,
		Member: &discordgo.Member{User: &discordgo.User{ID: e2eAlice}}, Data: discordgo.ApplicationCommandInteractionData{Name: "status"}})
	rs, err := i.Wait(ctx, 1)
	if err != nil || rs[0].Data == nil || !strings.Contains(rs[0].Data.Content, "not allowed") {
		t.Errorf("command without authorised users: %+v, %v", rs, err)
	}
}

// TestDaemonRestartDeliversNoticesOnce stops the daemon while Discord
// holds its notices back (a long rate limit) and starts it again: each
// notice is then posted exactly once.
func TestDaemonRestartDeliversNoticesOnce(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(discordtest.Options{Token: "e2e-token", Clock: stillClock(), Channels: []string{e2eControl}})
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", `
discord:
  token: e2e-token
  guild_id: "`+discordtest.DefaultGuildID+`"
  control_channel_id: "`+e2eControl+`"
  authorized_users: ["`+e2eAlice+`"]
  api_base_url: `+fake.URL()+`
`)
	data := filepath.Join(dir, "data")
	d := startDaemon(t, data, "--config", cfg)
	ctx := d.watch.Context()
	posts := func(method, path string) bool {
		return method == "POST" && path == "/api/v9/channels/"+e2eControl+"/messages"
	}
	fake.RateLimit(1, time.Hour, false, posts)
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	var ids []string
	for _, title := range []string{"One", "Two", "Three"} {
		ids = append(ids, taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", title))...)
	}
	for _, id := range ids {
		mustCtl(t, addr, "task", "delete", id)
	}
	limited := func() bool {
		for _, r := range fake.Requests() {
			if r.Status == 429 {
				return true
			}
		}
		return false
	}
	if err := fake.WaitFor(ctx, limited); err != nil {
		t.Fatalf("no notice tried: %v\n%s", err, d.logs)
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Messages(e2eControl)); n != 0 {
		t.Fatalf("%d notices posted before the restart", n)
	}

	d = startDaemon(t, data, "--config", cfg)
	deleted := func() int {
		n := 0
		for _, m := range fake.Messages(e2eControl) {
			if strings.Contains(m.Content, "was deleted") {
				n++
			}
		}
		return n
	}
	if err := fake.WaitFor(d.watch.Context(), func() bool { return deleted() >= 3 }); err != nil {
		t.Fatalf("notices after the restart: %d: %v\n%s", deleted(), err, d.logs)
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		n := 0
		for _, m := range fake.Messages(e2eControl) {
			if strings.Contains(m.Content, id) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the notice of %s was posted %d times", id, n)
		}
	}
}
