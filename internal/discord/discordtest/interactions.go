package discordtest

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Response is one thing the bot did with an interaction, as recorded by
// Interaction.Responses.
type Response struct {
	// Kind is "callback" (the initial response), "edit" or "delete" (of
	// @original), "followup", "followup_edit" or "followup_delete".
	Kind string
	// Type is the callback's response type (callbacks only).
	Type discordgo.InteractionResponseType
	// Data is the callback's data as sent: content, components, flags,
	// choices (autocomplete), custom_id/title/components (modal). Nil for
	// other kinds or a callback without data.
	Data *discordgo.InteractionResponseData
	// Message is the resulting message: the one a callback of type 4, 5 or
	// 7 created or updated, or the edited, created or deleted message.
	Message *discordgo.Message
	// Late reports a callback that arrived after the deadline and was
	// refused with 10062.
	Late bool
	// At is when the fake received the request, on Options.Clock
	// (the clock of Interaction.Deadline).
	At time.Time
}

// Interaction is the fake's handle on one interaction dispatched by
// Server.Interact. Its methods are safe for concurrent use.
type Interaction struct {
	s           *Server
	id, token   string
	itype       discordgo.InteractionType
	payload     json.RawMessage
	channelID   string
	commandName string
	user        *discordgo.User
	dispatched  time.Time
	deadline    time.Time
	message     *msgRec // the message a component was on

	acked     bool
	ackType   discordgo.InteractionResponseType
	original  *msgRec
	followups map[string]*msgRec
	responses []Response
}

const interactionMessageFlags = discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsEphemeral |
	discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlagsIsComponentsV2

// Interact dispatches INTERACTION_CREATE (queued while no client is
// connected) and returns a handle to follow the bot's responses. It fills,
// in i itself: id, token, application_id, guild_id, version 1, the channel
// (the component's message's channel or the first channel) and member
// (DefaultUserID) when empty, locale, and for a component interaction the
// current state of i.Message (looked up by i.Message.ID). Type 0 is inferred
// from the data: component, modal submit, or else application command. A
// command's data id is filled from the registered command of the same name.
// The initial-response deadline starts now, as Options.Clock reads (see
// Interaction.Deadline). It panics for a component interaction without a
// message and for an unknown channel.
func (s *Server) Interact(i *discordgo.Interaction) *Interaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i.Type == 0 {
		switch i.Data.(type) {
		case discordgo.MessageComponentInteractionData, *discordgo.MessageComponentInteractionData:
			i.Type = discordgo.InteractionMessageComponent
		case discordgo.ModalSubmitInteractionData, *discordgo.ModalSubmitInteractionData:
			i.Type = discordgo.InteractionModalSubmit
		default:
			i.Type = discordgo.InteractionApplicationCommand
		}
	}
	i.ID = s.newIDLocked()
	i.Token = "aW50ZXJhY3Rpb246" + i.ID + randomHex(24)
	i.AppID = s.opts.ApplicationID
	i.GuildID = s.opts.GuildID
	i.Version = 1
	var msg *msgRec
	var msgJSON json.RawMessage
	if i.Message != nil && i.Message.ID != "" {
		if rec := s.messages[i.Message.ID]; rec != nil && !rec.deleted {
			msg = rec
			i.Message = copyMessage(rec.m)
		}
	}
	if i.Message != nil {
		normalizeMessage(i.Message)
		msgJSON = messageJSON(i.Message, nil)
	}
	if i.Type == discordgo.InteractionMessageComponent && i.Message == nil {
		panic("discordtest: a component interaction needs the message the component is on")
	}
	if i.ChannelID == "" {
		if i.Message != nil && i.Message.ChannelID != "" {
			i.ChannelID = i.Message.ChannelID
		} else {
			i.ChannelID = s.channelOrder[0]
		}
	}
	if s.channels[i.ChannelID] == nil {
		panic("discordtest: Interact in unknown channel " + i.ChannelID)
	}
	now := time.Now().UTC()
	if i.Member == nil && i.User == nil {
		i.Member = &discordgo.Member{User: defaultUser(), Roles: []string{}, JoinedAt: now, Permissions: discordgo.PermissionAll}
	}
	if i.Locale == "" {
		i.Locale = discordgo.EnglishUS
	}
	if i.GuildLocale == nil {
		l := discordgo.EnglishUS
		i.GuildLocale = &l
	}
	if i.AppPermissions == 0 {
		i.AppPermissions = discordgo.PermissionAllText
	}
	if i.AuthorizingIntegrationOwners == nil {
		i.AuthorizingIntegrationOwners = map[discordgo.ApplicationIntegrationType]string{
			discordgo.ApplicationIntegrationGuildInstall: s.opts.GuildID,
		}
	}
	if i.Entitlements == nil {
		i.Entitlements = []*discordgo.Entitlement{}
	}
	name := ""
	fillCommand := func(d *discordgo.ApplicationCommandInteractionData) {
		if d.CommandType == 0 {
			d.CommandType = discordgo.ChatApplicationCommand
		}
		if d.ID == "" {
			for _, c := range append(append([]*discordgo.ApplicationCommand(nil), s.guildCommands...), s.globalCommands...) {
				if c.Name == d.Name && c.Type == d.CommandType {
					d.ID = c.ID
					break
				}
			}
		}
		name = d.Name
	}
	switch d := i.Data.(type) {
	case discordgo.ApplicationCommandInteractionData:
		fillCommand(&d)
		i.Data = d
	case *discordgo.ApplicationCommandInteractionData:
		fillCommand(d)
	}
	user := defaultUser()
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
	} else if i.User != nil {
		user = i.User
	}
	h := &Interaction{
		s:           s,
		id:          i.ID,
		token:       i.Token,
		itype:       i.Type,
		payload:     interactionJSON(i, msgJSON),
		channelID:   i.ChannelID,
		commandName: name,
		user:        user,
		dispatched:  s.opts.Clock.Now(),
		message:     msg,
		followups:   make(map[string]*msgRec),
	}
	h.deadline = h.dispatched.Add(s.opts.InteractionDeadline)
	s.interactions[h.id] = h
	s.tokens[h.token] = h
	s.logf("interaction %s (type %d) dispatched", h.id, h.itype)
	s.dispatchLocked(&event{t: "INTERACTION_CREATE", data: h.payload})
	s.notifyLocked()
	return h
}

// ID returns the interaction id.
func (h *Interaction) ID() string { return h.id }

// Token returns the interaction token.
func (h *Interaction) Token() string { return h.token }

// Payload returns the interaction as dispatched.
func (h *Interaction) Payload() *discordgo.Interaction {
	var i discordgo.Interaction
	if err := json.Unmarshal(h.payload, &i); err != nil {
		panic("discordtest: decoding interaction: " + err.Error())
	}
	return &i
}

// Deadline returns the time after which the initial response is refused,
// on Options.Clock: a callback is late when it reads after it.
func (h *Interaction) Deadline() time.Time { return h.deadline }

// Acknowledged reports whether an initial response was accepted.
func (h *Interaction) Acknowledged() bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.acked
}

// Responses returns what the bot did with the interaction, in order.
func (h *Interaction) Responses() []Response {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	out := make([]Response, len(h.responses))
	copy(out, h.responses)
	return out
}

// Wait waits until at least n responses were recorded and returns them.
func (h *Interaction) Wait(ctx context.Context, n int) ([]Response, error) {
	var rs []Response
	err := h.s.WaitFor(ctx, func() bool {
		rs = h.Responses()
		return len(rs) >= n
	})
	return rs, err
}

// Original returns the current original response message: the message a
// callback of type 4 created, the placeholder of type 5 (flag LOADING until
// filled by an edit or the first follow-up), or the component's message
// after type 6 or 7. Nil before that, or after it was deleted.
func (h *Interaction) Original() *discordgo.Message {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.original == nil || h.original.deleted {
		return nil
	}
	return copyMessage(h.original.m)
}

func (h *Interaction) recordLocked(r Response) {
	r.At = h.s.opts.Clock.Now()
	if r.Message != nil {
		r.Message = copyMessage(r.Message)
	}
	h.responses = append(h.responses, r)
	h.s.notifyLocked()
}

func responseData(p *messagePayload) *discordgo.InteractionResponseData {
	d := &discordgo.InteractionResponseData{TTS: p.TTS, Content: p.content()}
	if p.Components != nil {
		d.Components = payloadComponents(p)
	}
	if p.Embeds != nil {
		d.Embeds = *p.Embeds
	}
	if p.Flags != nil {
		d.Flags = *p.Flags
	}
	if p.Choices != nil {
		d.Choices = *p.Choices
	}
	if p.CustomID != nil {
		d.CustomID = *p.CustomID
	}
	if p.Title != nil {
		d.Title = *p.Title
	}
	return d
}

func (h *Interaction) responseAllowed(t discordgo.InteractionResponseType) bool {
	switch t {
	case discordgo.InteractionResponsePong:
		return h.itype == discordgo.InteractionPing
	case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseDeferredChannelMessageWithSource:
		return h.itype == discordgo.InteractionApplicationCommand || h.itype == discordgo.InteractionMessageComponent ||
			h.itype == discordgo.InteractionModalSubmit
	case discordgo.InteractionResponseDeferredMessageUpdate, discordgo.InteractionResponseUpdateMessage:
		return (h.itype == discordgo.InteractionMessageComponent || h.itype == discordgo.InteractionModalSubmit) && h.message != nil
	case discordgo.InteractionApplicationCommandAutocompleteResult:
		return h.itype == discordgo.InteractionApplicationCommandAutocomplete
	case discordgo.InteractionResponseModal:
		return h.itype == discordgo.InteractionApplicationCommand || h.itype == discordgo.InteractionMessageComponent
	}
	return false
}

// interactionMessageLocked creates the message of a type 4 or 5 callback.
func (s *Server) interactionMessageLocked(h *Interaction) *discordgo.Message {
	m := s.newMessageLocked(h.channelID, s.botUser())
	m.WebhookID = s.opts.ApplicationID
	switch h.itype {
	case discordgo.InteractionApplicationCommand:
		m.Type = discordgo.MessageTypeChatInputCommand
		m.Interaction = &discordgo.MessageInteraction{ID: h.id, Type: h.itype, Name: h.commandName, User: h.user}
	case discordgo.InteractionMessageComponent, discordgo.InteractionModalSubmit:
		if h.message != nil {
			m.Type = discordgo.MessageTypeReply
			m.MessageReference = &discordgo.MessageReference{MessageID: h.message.m.ID, ChannelID: h.message.m.ChannelID, GuildID: s.opts.GuildID}
		}
	}
	m.InteractionMetadata = &discordgo.MessageInteractionMetadata{
		ID: h.id, Type: h.itype, User: h.user,
		AuthorizingIntegrationOwners: map[discordgo.ApplicationIntegrationType]string{discordgo.ApplicationIntegrationGuildInstall: s.opts.GuildID},
	}
	return m
}

func (s *Server) interactionCallback(w *response, q *restReq) {
	payload, files, err := parseBody(q)
	if err != nil {
		w.apiError(http.StatusBadRequest, codeGeneral, "400: Bad Request")
		return
	}
	var cb struct {
		Type discordgo.InteractionResponseType `json:"type"`
		Data json.RawMessage                   `json:"data"`
	}
	if !decodeBody(w, payload, &cb) {
		return
	}
	p := &messagePayload{}
	hasData := len(cb.Data) > 0 && string(cb.Data) != "null"
	if hasData && !decodeBody(w, cb.Data, p) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.interactions[q.params["id"]]
	if h == nil || h.token != q.params["token"] {
		w.apiError(http.StatusNotFound, codeUnknownInteraction, "Unknown interaction")
		return
	}
	if h.acked {
		w.apiError(http.StatusBadRequest, codeAlreadyAcknowledged, "Interaction has already been acknowledged.")
		return
	}
	var data *discordgo.InteractionResponseData
	if hasData {
		data = responseData(p)
	}
	if s.opts.Clock.Now().After(h.deadline) {
		h.recordLocked(Response{Kind: "callback", Type: cb.Type, Data: data, Late: true})
		w.apiError(http.StatusNotFound, codeUnknownInteraction, "Unknown interaction")
		return
	}
	fe := &formErrors{}
	switch cb.Type {
	case 1, 4, 5, 6, 7, 8, 9:
		if !h.responseAllowed(cb.Type) {
			fe.add("type", "INTERACTION_RESPONSE_TYPE_INVALID", "Interaction response type is invalid for this interaction type")
		}
	default:
		fe.add("type", "BASE_TYPE_CHOICES", "Value must be one of {1, 4, 5, 6, 7, 8, 9}.")
	}
	if !fe.failed() {
		switch cb.Type {
		case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseUpdateMessage:
			validateMessage(fe, "data", p, false)
		case discordgo.InteractionApplicationCommandAutocompleteResult:
			validateAutocomplete(fe, p)
		case discordgo.InteractionResponseModal:
			validateModal(fe, p)
		}
	}
	if fe.failed() {
		w.formError(fe)
		return
	}
	if cb.Type == discordgo.InteractionResponseChannelMessageWithSource && payloadIsEmpty(p, files) {
		w.apiError(http.StatusBadRequest, codeEmptyMessage, "Cannot send an empty message")
		return
	}
	resp := Response{Kind: "callback", Type: cb.Type, Data: data}
	switch cb.Type {
	case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseDeferredChannelMessageWithSource:
		m := s.interactionMessageLocked(h)
		if cb.Type == discordgo.InteractionResponseDeferredChannelMessageWithSource {
			eph := discordgo.MessageFlags(0)
			if p.Flags != nil {
				eph = *p.Flags & discordgo.MessageFlagsEphemeral
			}
			m.Flags = discordgo.MessageFlagsLoading | eph
		} else {
			s.applyPayloadLocked(m, p, files, interactionMessageFlags)
		}
		rec := &msgRec{m: m, ephemeral: m.Flags&discordgo.MessageFlagsEphemeral != 0}
		s.storeMessageLocked(s.channels[h.channelID], rec)
		s.messageEventLocked("MESSAGE_CREATE", rec)
		h.original = rec
		resp.Message = m
	case discordgo.InteractionResponseDeferredMessageUpdate:
		h.original = h.message
	case discordgo.InteractionResponseUpdateMessage:
		rec := h.message
		nm := copyMessage(rec.m)
		normalizeMessage(nm)
		s.applyPayloadLocked(nm, p, files, discordgo.MessageFlagsSuppressEmbeds)
		now := time.Now().UTC()
		nm.EditedTimestamp = &now
		rec.m = nm
		s.messageEventLocked("MESSAGE_UPDATE", rec)
		h.original = rec
		resp.Message = nm
	}
	h.acked = true
	h.ackType = cb.Type
	h.recordLocked(resp)
	w.noContent()
}

func validateAutocomplete(fe *formErrors, p *messagePayload) {
	if p.Choices == nil {
		fe.add("data.choices", "BASE_TYPE_REQUIRED", "This field is required")
		return
	}
	if len(*p.Choices) > 25 {
		fe.add("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	for i, c := range *p.Choices {
		if c == nil {
			continue
		}
		if n := utf8.RuneCountInString(c.Name); n < 1 || n > 100 {
			fe.add(join("data.choices", i, "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
	}
}

func validateModal(fe *formErrors, p *messagePayload) {
	id := ""
	if p.CustomID != nil {
		id = *p.CustomID
	}
	if n := utf8.RuneCountInString(id); n < 1 || n > 100 {
		fe.add("data.custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	title := ""
	if p.Title != nil {
		title = *p.Title
	}
	if n := utf8.RuneCountInString(title); n < 1 || n > 45 {
		fe.add("data.title", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 45 in length.")
	}
	var comps []json.RawMessage
	if p.Components != nil {
		comps = *p.Components
	}
	validateComponents(fe, "data.components", comps, true, false)
}

// webhookInteraction resolves the interaction of a webhook route; before
// the interaction was acknowledged its webhook does not exist.
func (s *Server) webhookInteractionLocked(w *response, q *restReq) *Interaction {
	h := s.tokens[q.params["token"]]
	if q.params["app"] != s.opts.ApplicationID || h == nil || !h.acked {
		w.apiError(http.StatusNotFound, codeUnknownWebhook, "Unknown Webhook")
		return nil
	}
	return h
}

// webhookMessageLocked resolves "@original" or a follow-up id.
func (s *Server) webhookMessageLocked(w *response, q *restReq) (*Interaction, *msgRec) {
	h := s.webhookInteractionLocked(w, q)
	if h == nil {
		return nil, nil
	}
	var rec *msgRec
	if mid := q.params["mid"]; mid == "@original" {
		rec = h.original
	} else if h.original != nil && h.original.m.ID == mid {
		rec = h.original
	} else {
		rec = h.followups[mid]
	}
	if rec == nil || rec.deleted {
		w.apiError(http.StatusNotFound, codeUnknownMessage, "Unknown Message")
		return nil, nil
	}
	return h, rec
}

func (s *Server) webhookGetMessage(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, rec := s.webhookMessageLocked(w, q); rec != nil {
		w.json(http.StatusOK, messageJSON(rec.m, nil))
	}
}

func (s *Server) webhookEditMessage(w *response, q *restReq) {
	p, files, _, ok := readMessagePayload(w, q)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, rec := s.webhookMessageLocked(w, q)
	if rec == nil {
		return
	}
	if !s.editRecordLocked(w, rec, p, files, discordgo.MessageFlagsSuppressEmbeds) {
		return
	}
	kind := "followup_edit"
	if rec == h.original {
		kind = "edit"
	}
	h.recordLocked(Response{Kind: kind, Message: rec.m})
	w.json(http.StatusOK, messageJSON(rec.m, nil))
}

func (s *Server) webhookDeleteMessage(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, rec := s.webhookMessageLocked(w, q)
	if rec == nil {
		return
	}
	s.deleteMessageLocked(rec)
	kind := "followup_delete"
	if rec == h.original {
		kind = "delete"
	}
	h.recordLocked(Response{Kind: kind, Message: rec.m})
	w.noContent()
}

func (s *Server) webhookExecute(w *response, q *restReq) {
	p, files, _, ok := readMessagePayload(w, q)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.webhookInteractionLocked(w, q)
	if h == nil {
		return
	}
	if payloadIsEmpty(p, files) {
		w.apiError(http.StatusBadRequest, codeEmptyMessage, "Cannot send an empty message")
		return
	}
	var rec *msgRec
	if o := h.original; o != nil && !o.deleted && h.ackType == discordgo.InteractionResponseDeferredChannelMessageWithSource &&
		o.m.Flags&discordgo.MessageFlagsLoading != 0 {
		// The first follow-up after a deferred response replaces the
		// "thinking" placeholder and keeps its ephemeral flag.
		if !s.editRecordLocked(w, o, p, files, discordgo.MessageFlagsSuppressEmbeds) {
			return
		}
		rec = o
	} else {
		m := s.newMessageLocked(h.channelID, s.botUser())
		m.WebhookID = s.opts.ApplicationID
		m.InteractionMetadata = &discordgo.MessageInteractionMetadata{ID: h.id, Type: h.itype, User: h.user}
		s.applyPayloadLocked(m, p, files, interactionMessageFlags)
		rec = &msgRec{m: m, ephemeral: m.Flags&discordgo.MessageFlagsEphemeral != 0}
		s.storeMessageLocked(s.channels[h.channelID], rec)
		s.messageEventLocked("MESSAGE_CREATE", rec)
		h.followups[m.ID] = rec
	}
	h.recordLocked(Response{Kind: "followup", Message: rec.m})
	if q.query.Get("wait") == "true" {
		w.json(http.StatusOK, messageJSON(rec.m, nil))
	} else {
		w.noContent()
	}
}
