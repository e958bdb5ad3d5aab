package discord

import (
	"context"
	"errors"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// reply is what an operation answers a person with.
type reply struct {
	Content    string
	Components []discordgo.MessageComponent
	// File is attached when set (long texts).
	File *attachment
	// Ephemeral replies are seen only by the person who acted.
	Ephemeral bool
	// Update replaces the message a pressed button was on instead of
	// answering with a new message.
	Update bool
}

// text returns a reply whose content, when longer than a message holds
// (in characters, as Discord counts), goes into an attached file.
func text(content string) reply {
	if utf8.RuneCountInString(content) <= messageLimit {
		return reply{Content: content}
	}
	head := cut(content, 300)
	return reply{Content: head + "\n*(full text attached)*", File: &attachment{Name: "reply.txt", Body: content}}
}

// ephemeral returns a reply only the acting person sees.
func ephemeral(content string) reply {
	r := text(content)
	r.Ephemeral = true
	return r
}

// errorReply turns an error into a user-safe ephemeral answer: the message
// of errors with a code the person can act on, a generic text otherwise.
func (b *Bot) errorReply(op string, err error) reply {
	var e *models.Error
	if errors.As(err, &e) && e.Code != models.CodeInternal {
		return ephemeral("⚠️ " + e.Message)
	}
	if errors.Is(err, context.Canceled) {
		return ephemeral("⚠️ The daemon is restarting; check `/status` in a moment before trying again.")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ephemeral("⚠️ That took too long and was given up. Check `/status` before trying again.")
	}
	b.log.Error("discord operation failed", "op", op, "err", err)
	return ephemeral("⚠️ Something went wrong on the daemon's side; it has been logged.")
}

// interactionUser returns the id of the person behind an interaction.
func interactionUser(i *discordgo.Interaction) string {
	switch {
	case i.Member != nil && i.Member.User != nil:
		return i.Member.User.ID
	case i.User != nil:
		return i.User.ID
	}
	return ""
}

// actor is how a Discord user is recorded in the task history.
func actor(userID string) string { return "discord:" + userID }

// handleInteraction answers one interaction.
func (b *Bot) handleInteraction(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("discord interaction panicked", "interaction", i.ID, "panic", p, "stack", string(debug.Stack()))
			// Refused harmlessly if an answer went out already.
			b.respondNow(s, i, ephemeral("⚠️ Something went wrong on the daemon's side; it has been logged."))
		}
	}()
	user := interactionUser(i)
	log := b.log.With("interaction", i.ID, "user", user)
	if i.Type == discordgo.InteractionApplicationCommandAutocomplete {
		if !b.authorized(user) {
			b.respondChoices(s, i, nil)
			return
		}
		b.respondChoices(s, i, b.autocomplete(ctx, i))
		return
	}
	if !b.authorized(user) {
		log.Warn("discord interaction refused: user not authorized")
		b.respondNow(s, i, ephemeral("🚫 You are not allowed to use agentqueued here. Ask an admin to add your user id to `discord.authorized_users`."))
		return
	}
	if i.Member != nil {
		ctx = withRoles(ctx, i.Member.Roles)
	}
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		b.command(ctx, s, i, user)
	case discordgo.InteractionMessageComponent:
		b.component(ctx, s, i, user)
	case discordgo.InteractionModalSubmit:
		b.modalSubmit(ctx, s, i, user)
	default:
		b.respondNow(s, i, ephemeral("⚠️ This kind of interaction is not supported."))
	}
}

// run answers an interaction with the reply of op. When op takes longer
// than AckAfter (on the timer of Config.Clock), the answer is deferred first
// (Discord wants one within 3 s) and the reply edited in once op is done.
// An operation outlives a shutdown by at most shutdownGrace.
func (b *Bot) run(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, defaultEphemeral bool, op func(ctx context.Context) reply) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.OperationTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(shutdownGrace, cancel)
		context.AfterFunc(octx, func() { t.Stop() })
	})
	defer stop()
	done := make(chan reply, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				b.log.Error("discord operation panicked", "panic", p, "interaction", i.ID, "stack", string(debug.Stack()))
				done <- ephemeral("⚠️ Something went wrong on the daemon's side; it has been logged.")
			}
		}()
		done <- op(octx)
	}()
	select {
	case r := <-done:
		if defaultEphemeral {
			r.Ephemeral = true
		}
		b.respondNow(s, i, r)
		return
	case <-b.cfg.Clock.After(b.cfg.AckAfter):
	}
	// Slow: acknowledge now, answer when done.
	component := updatable(i)
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}
	if component {
		resp.Type = discordgo.InteractionResponseDeferredMessageUpdate
	} else if defaultEphemeral {
		resp.Data = &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}
	}
	if err := s.InteractionRespond(i, resp); err != nil {
		b.log.Warn("defer discord interaction", "interaction", i.ID, "err", redactURL(err.Error()))
	}
	r := <-done
	r.Content, r.File = fit(r.Content, r.File)
	none := &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
	publicDefer := !component && !defaultEphemeral
	if (component && !r.Update) || (publicDefer && r.Ephemeral) {
		// The answer is a follow-up: the button's message stays, or an
		// answer meant for one person replaces the public "thinking…".
		if publicDefer {
			if err := s.InteractionResponseDelete(i); err != nil {
				// The first follow-up would take the placeholder's public
				// place: say something neutral there instead.
				b.log.Warn("delete discord placeholder", "interaction", i.ID, "err", redactURL(err.Error()))
				neutral := "The answer was meant for you only and could not be shown privately; please try again."
				empty := []discordgo.MessageComponent{}
				if _, err := s.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &neutral, Components: &empty,
					AllowedMentions: none}); err != nil {
					b.log.Warn("edit discord placeholder", "interaction", i.ID, "err", redactURL(err.Error()))
				}
				return
			}
		}
		params := &discordgo.WebhookParams{Content: r.Content, Components: r.Components, AllowedMentions: none}
		if r.Ephemeral || defaultEphemeral {
			params.Flags = discordgo.MessageFlagsEphemeral
		}
		if r.File != nil {
			params.Files = []*discordgo.File{r.File.file()}
		}
		if _, err := s.FollowupMessageCreate(i, true, params); err != nil {
			b.log.Warn("follow up discord interaction", "interaction", i.ID, "err", redactURL(err.Error()))
		}
		return
	}
	comps := r.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	edit := &discordgo.WebhookEdit{Content: &r.Content, Components: &comps, AllowedMentions: none}
	if r.File != nil {
		edit.Files = []*discordgo.File{r.File.file()}
	}
	if _, err := s.InteractionResponseEdit(i, edit); err != nil {
		b.log.Warn("edit discord answer", "interaction", i.ID, "err", redactURL(err.Error()))
	}
}

// shutdownGrace is how long an operation started from Discord may go on
// once the daemon shuts down.
const shutdownGrace = 10 * time.Second

// updatable reports whether an interaction may update the message it came
// from: a button press, or a form opened by one.
func updatable(i *discordgo.Interaction) bool {
	return i.Message != nil && (i.Type == discordgo.InteractionMessageComponent || i.Type == discordgo.InteractionModalSubmit)
}

// respondNow answers an interaction at once with r.
func (b *Bot) respondNow(s *discordgo.Session, i *discordgo.Interaction, r reply) {
	r.Content, r.File = fit(r.Content, r.File)
	data := &discordgo.InteractionResponseData{Content: r.Content, Components: r.Components,
		AllowedMentions: &discordgo.MessageAllowedMentions{}}
	if r.Ephemeral {
		data.Flags = discordgo.MessageFlagsEphemeral
	}
	if r.File != nil {
		data.Files = []*discordgo.File{r.File.file()}
	}
	typ := discordgo.InteractionResponseChannelMessageWithSource
	if r.Update && updatable(i) {
		typ = discordgo.InteractionResponseUpdateMessage
		if data.Components == nil {
			data.Components = []discordgo.MessageComponent{}
		}
	}
	if err := s.InteractionRespond(i, &discordgo.InteractionResponse{Type: typ, Data: data}); err != nil {
		b.log.Warn("answer discord interaction", "interaction", i.ID, "err", redactURL(err.Error()))
	}
}

func (b *Bot) respondChoices(s *discordgo.Session, i *discordgo.Interaction, choices []*discordgo.ApplicationCommandOptionChoice) {
	if choices == nil {
		choices = []*discordgo.ApplicationCommandOptionChoice{}
	}
	// Discord requires "choices" even when empty, which discordgo's
	// response type omits: the answer is written out here.
	body := struct {
		Type discordgo.InteractionResponseType `json:"type"`
		Data struct {
			Choices []*discordgo.ApplicationCommandOptionChoice `json:"choices"`
		} `json:"data"`
	}{Type: discordgo.InteractionApplicationCommandAutocompleteResult}
	body.Data.Choices = choices
	endpoint := discordgo.EndpointInteractionResponse(i.ID, i.Token)
	_, err := s.RequestWithBucketID("POST", endpoint, body, endpoint)
	if err != nil {
		b.log.Warn("answer discord autocomplete", "interaction", i.ID, "err", redactURL(err.Error()))
	}
}

// formField is one text input of a modal.
type formField struct {
	ID, Label, Placeholder string
	// Value is the text the input opens with.
	Value     string
	Paragraph bool
	Required  bool
	// MaxLength defaults to Discord's most, maxFormText.
	MaxLength int
}

// maxFormText is the most a modal's text input holds, in characters.
const maxFormText = 4000

// respondModal opens a modal with one paragraph input: it must be the
// interaction's first answer.
func (b *Bot) respondModal(s *discordgo.Session, i *discordgo.Interaction, customID, title, label, placeholder string, required bool) {
	b.respondForm(s, i, customID, title, formField{ID: "text", Label: label, Placeholder: placeholder, Paragraph: true, Required: required})
}

// respondForm opens a modal with up to five text inputs: it must be the
// interaction's first answer.
func (b *Bot) respondForm(s *discordgo.Session, i *discordgo.Interaction, customID, title string, fields ...formField) {
	var rows []discordgo.MessageComponent
	for _, f := range fields {
		style := discordgo.TextInputShort
		if f.Paragraph {
			style = discordgo.TextInputParagraph
		}
		maxLen := f.MaxLength
		if maxLen <= 0 || maxLen > maxFormText {
			maxLen = maxFormText
		}
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: f.ID, Label: cut(f.Label, 45), Style: style, Placeholder: cut(f.Placeholder, 100),
				Value: cut(f.Value, maxLen), Required: f.Required, MaxLength: maxLen},
		}})
	}
	err := s.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{CustomID: customID, Title: cut(title, 45), Components: rows}})
	if err != nil {
		b.log.Warn("open discord modal", "interaction", i.ID, "err", redactURL(err.Error()))
	}
}

// modalText returns the text typed into a modal's one input.
func modalText(i *discordgo.Interaction) string { return modalValues(i)["text"] }

// modalValues returns the texts typed into a modal, by input id; an input
// the modal did not have is absent.
func modalValues(i *discordgo.Interaction) map[string]string {
	out := map[string]string{}
	data := i.ModalSubmitData()
	for _, row := range data.Components {
		r, ok := row.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, c := range r.Components {
			if in, ok := c.(*discordgo.TextInput); ok && in.CustomID != "" {
				out[in.CustomID] = in.Value
			}
		}
	}
	return out
}
