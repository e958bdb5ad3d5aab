package discordtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// nonceWindow is how long enforce_nonce deduplicates ("a few minutes").
const nonceWindow = 5 * time.Minute

type chanRec struct {
	ch     *discordgo.Channel
	msgs   []*msgRec
	nonces map[string]nonceRec
}

type nonceRec struct {
	msg *msgRec
	at  time.Time
}

type msgRec struct {
	m         *discordgo.Message
	nonce     json.RawMessage
	ephemeral bool
	deleted   bool
}

func (s *Server) newMessageLocked(channelID string, author *discordgo.User) *discordgo.Message {
	now := time.Now().UTC()
	return &discordgo.Message{
		ID:           s.newIDLocked(),
		ChannelID:    channelID,
		GuildID:      s.opts.GuildID,
		Timestamp:    now,
		Author:       author,
		Member:       &discordgo.Member{Roles: []string{}, JoinedAt: now},
		Type:         discordgo.MessageTypeDefault,
		Embeds:       []*discordgo.MessageEmbed{},
		Attachments:  []*discordgo.MessageAttachment{},
		Mentions:     []*discordgo.User{},
		MentionRoles: []string{},
		Components:   []discordgo.MessageComponent{},
	}
}

func normalizeMessage(m *discordgo.Message) {
	if m.Embeds == nil {
		m.Embeds = []*discordgo.MessageEmbed{}
	}
	if m.Attachments == nil {
		m.Attachments = []*discordgo.MessageAttachment{}
	}
	if m.Mentions == nil {
		m.Mentions = []*discordgo.User{}
	}
	if m.MentionRoles == nil {
		m.MentionRoles = []string{}
	}
	if m.Components == nil {
		m.Components = []discordgo.MessageComponent{}
	}
}

// payloadComponents decodes a payload's components (already validated).
func payloadComponents(p *messagePayload) []discordgo.MessageComponent {
	if p.Components == nil {
		return nil
	}
	comps, err := componentsFromJSON(*p.Components)
	if err != nil {
		return []discordgo.MessageComponent{}
	}
	return comps
}

// applyPayloadLocked writes the fields present in p (and uploaded files)
// into m. For an edit, absent fields are kept.
func (s *Server) applyPayloadLocked(m *discordgo.Message, p *messagePayload, files []upload, allowedFlags discordgo.MessageFlags) {
	if p.Content != nil {
		m.Content = *p.Content
	}
	if p.Embeds != nil {
		m.Embeds = append([]*discordgo.MessageEmbed{}, (*p.Embeds)...)
		for _, e := range m.Embeds {
			if e != nil && e.Type == "" {
				e.Type = discordgo.EmbedTypeRich
			}
		}
	}
	if p.Components != nil {
		m.Components = payloadComponents(p)
	}
	if p.Flags != nil {
		m.Flags = m.Flags&^allowedFlags | *p.Flags&allowedFlags
	}
	if p.TTS {
		m.TTS = true
	}
	if p.Attachments != nil {
		keep := map[string]bool{}
		for _, a := range *p.Attachments {
			keep[a.id()] = true
		}
		kept := []*discordgo.MessageAttachment{}
		for _, a := range m.Attachments {
			if keep[a.ID] {
				kept = append(kept, a)
			}
		}
		m.Attachments = kept
	}
	for i, f := range files {
		name := f.name
		if p.Attachments != nil {
			for _, a := range *p.Attachments {
				if a.id() == strconv.Itoa(i) && a.Filename != "" {
					name = a.Filename
				}
			}
		}
		id := s.newIDLocked()
		path := m.ChannelID + "/" + id + "/" + url.PathEscape(name)
		m.Attachments = append(m.Attachments, &discordgo.MessageAttachment{
			ID:          id,
			Filename:    name,
			ContentType: f.contentType,
			Size:        len(f.data),
			URL:         "https://cdn.discordapp.com/attachments/" + path,
			ProxyURL:    "https://media.discordapp.net/attachments/" + path,
		})
		s.attachments[id] = append([]byte(nil), f.data...)
	}
}

func isEmptyMessage(m *discordgo.Message) bool {
	return m.Content == "" && len(m.Embeds) == 0 && len(m.Attachments) == 0 && len(m.Components) == 0 && m.Poll == nil
}

func (s *Server) storeMessageLocked(ch *chanRec, rec *msgRec) {
	s.messages[rec.m.ID] = rec
	if rec.ephemeral {
		return
	}
	ch.msgs = append(ch.msgs, rec)
	ch.ch.LastMessageID = rec.m.ID
	if ch.ch.IsThread() {
		ch.ch.MessageCount++
		if md := ch.ch.ThreadMetadata; md != nil && md.Archived {
			md.Archived = false
			md.ArchiveTimestamp = time.Now().UTC()
			s.dispatchLocked(&event{t: "THREAD_UPDATE", data: s.channelJSON(ch.ch), intent: discordgo.IntentGuilds})
		}
	}
}

// mentionsBot reports whether the message mentions the bot user.
func (s *Server) mentionsBot(m *discordgo.Message) bool {
	for _, u := range m.Mentions {
		if u != nil && u.ID == s.opts.BotUserID {
			return true
		}
	}
	return false
}

// messageEventLocked dispatches MESSAGE_CREATE or MESSAGE_UPDATE. Without
// the MESSAGE_CONTENT intent, a client gets content, embeds, attachments,
// components and polls only for its own messages and messages mentioning it.
func (s *Server) messageEventLocked(t string, rec *msgRec) {
	if rec.ephemeral {
		return
	}
	ev := &event{t: t, data: messageJSON(rec.m, nil), intent: discordgo.IntentGuildMessages}
	if (rec.m.Author == nil || rec.m.Author.ID != s.opts.BotUserID) && !s.mentionsBot(rec.m) {
		b := copyMessage(rec.m)
		b.Content = ""
		b.Embeds = []*discordgo.MessageEmbed{}
		b.Attachments = []*discordgo.MessageAttachment{}
		b.Components = []discordgo.MessageComponent{}
		b.Poll = nil
		ev.blanked = messageJSON(b, nil)
	}
	s.dispatchLocked(ev)
}

func (s *Server) deleteMessageLocked(rec *msgRec) {
	if rec.deleted {
		return
	}
	rec.deleted = true
	if ch := s.channels[rec.m.ChannelID]; ch != nil {
		for i, r := range ch.msgs {
			if r == rec {
				ch.msgs = append(ch.msgs[:i:i], ch.msgs[i+1:]...)
				break
			}
		}
	}
	if !rec.ephemeral {
		b, _ := json.Marshal(map[string]string{"id": rec.m.ID, "channel_id": rec.m.ChannelID, "guild_id": s.opts.GuildID})
		s.dispatchLocked(&event{t: "MESSAGE_DELETE", data: b, intent: discordgo.IntentGuildMessages})
	}
}

func (s *Server) channelJSON(c *discordgo.Channel) json.RawMessage {
	b, err := json.Marshal(c)
	if err != nil {
		panic("discordtest: encoding channel: " + err.Error())
	}
	return b
}

// readMessagePayload parses and validates a message body. It answers
// errors itself and reports false. requireContent adds the 50006 check.
func readMessagePayload(w *response, q *restReq) (*messagePayload, []upload, string, bool) {
	payload, files, err := parseBody(q)
	if err != nil {
		w.apiError(http.StatusBadRequest, codeGeneral, "400: Bad Request")
		return nil, nil, "", false
	}
	p := &messagePayload{}
	if !decodeBody(w, payload, p) {
		return nil, nil, "", false
	}
	fe := &formErrors{}
	validateMessage(fe, "", p, false)
	nonce := p.nonceKey(fe)
	if fe.failed() {
		w.formError(fe)
		return nil, nil, "", false
	}
	return p, files, nonce, true
}

func payloadIsEmpty(p *messagePayload, files []upload) bool {
	return p.content() == "" && (p.Embeds == nil || len(*p.Embeds) == 0) && len(files) == 0 &&
		(p.Components == nil || len(*p.Components) == 0) && len(p.StickerIDs) == 0 && !p.hasPoll()
}

func (s *Server) channelOr404(w *response, id string) *chanRec {
	ch := s.channels[id]
	if ch == nil {
		w.apiError(http.StatusNotFound, codeUnknownChannel, "Unknown Channel")
	}
	return ch
}

const messageFlagsSettable = discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlagsIsComponentsV2

func (s *Server) createMessage(w *response, q *restReq) {
	s.mu.Lock()
	ch := s.channelOr404(w, q.params["ch"])
	s.mu.Unlock()
	if ch == nil {
		return
	}
	p, files, nonce, ok := readMessagePayload(w, q)
	if !ok {
		return
	}
	if payloadIsEmpty(p, files) {
		w.apiError(http.StatusBadRequest, codeEmptyMessage, "Cannot send an empty message")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.EnforceNonce && nonce != "" {
		if nr, ok := ch.nonces[nonce]; ok && time.Since(nr.at) < nonceWindow {
			w.json(http.StatusOK, messageJSON(nr.msg.m, nr.msg.nonce))
			return
		}
	}
	m := s.newMessageLocked(ch.ch.ID, s.botUser())
	if ref := p.MessageReference; ref != nil {
		target := s.messages[ref.MessageID]
		if target == nil || target.deleted || target.m.ChannelID != ch.ch.ID {
			fe := &formErrors{}
			fe.add("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
			w.formError(fe)
			return
		}
		m.Type = discordgo.MessageTypeReply
		m.MessageReference = &discordgo.MessageReference{MessageID: ref.MessageID, ChannelID: ch.ch.ID, GuildID: s.opts.GuildID}
		m.ReferencedMessage = copyMessage(target.m)
	}
	s.applyPayloadLocked(m, p, files, messageFlagsSettable)
	rec := &msgRec{m: m}
	if nonce != "" {
		rec.nonce = append(json.RawMessage(nil), p.Nonce...)
		ch.nonces[nonce] = nonceRec{msg: rec, at: time.Now()}
	}
	s.storeMessageLocked(ch, rec)
	s.messageEventLocked("MESSAGE_CREATE", rec)
	s.notifyLocked()
	w.json(http.StatusOK, messageJSON(m, rec.nonce))
}

// channelMessageOr404 finds a visible message of a channel.
func (s *Server) channelMessageOr404(w *response, q *restReq) (*chanRec, *msgRec) {
	ch := s.channelOr404(w, q.params["ch"])
	if ch == nil {
		return nil, nil
	}
	rec := s.messages[q.params["mid"]]
	if rec == nil || rec.deleted || rec.ephemeral || rec.m.ChannelID != ch.ch.ID {
		w.apiError(http.StatusNotFound, codeUnknownMessage, "Unknown Message")
		return nil, nil
	}
	return ch, rec
}

func (s *Server) getMessage(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, rec := s.channelMessageOr404(w, q); rec != nil {
		w.json(http.StatusOK, messageJSON(rec.m, nil))
	}
}

func snowflakeLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}

func (s *Server) listMessages(w *response, q *restReq) {
	limit := 50
	if v := q.query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		fe := &formErrors{}
		switch {
		case err != nil:
			fe.add("limit", "NUMBER_TYPE_COERCE", fmt.Sprintf("Value %q is not int.", v))
		case n < 1:
			fe.add("limit", "NUMBER_TYPE_MIN", "int value should be greater than or equal to 1.")
		case n > 100:
			fe.add("limit", "NUMBER_TYPE_MAX", "int value should be less than or equal to 100.")
		}
		if fe.failed() {
			w.formError(fe)
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channelOr404(w, q.params["ch"])
	if ch == nil {
		return
	}
	msgs := ch.msgs
	var sel []*msgRec
	switch before, after, around := q.query.Get("before"), q.query.Get("after"), q.query.Get("around"); {
	case before != "":
		for _, r := range msgs {
			if snowflakeLess(r.m.ID, before) {
				sel = append(sel, r)
			}
		}
		if len(sel) > limit {
			sel = sel[len(sel)-limit:]
		}
	case after != "":
		for _, r := range msgs {
			if snowflakeLess(after, r.m.ID) {
				sel = append(sel, r)
			}
		}
		if len(sel) > limit {
			sel = sel[:limit]
		}
	case around != "":
		i := 0
		for i < len(msgs) && snowflakeLess(msgs[i].m.ID, around) {
			i++
		}
		lo := max(0, i-limit/2)
		hi := min(len(msgs), lo+limit)
		sel = msgs[lo:hi]
	default:
		sel = msgs
		if len(sel) > limit {
			sel = sel[len(sel)-limit:]
		}
	}
	out := make([]json.RawMessage, 0, len(sel))
	for i := len(sel) - 1; i >= 0; i-- {
		out = append(out, messageJSON(sel[i].m, nil))
	}
	w.json(http.StatusOK, out)
}

func (s *Server) editMessage(w *response, q *restReq) {
	s.mu.Lock()
	_, rec := s.channelMessageOr404(w, q)
	s.mu.Unlock()
	if rec == nil {
		return
	}
	p, files, _, ok := readMessagePayload(w, q)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.deleted {
		w.apiError(http.StatusNotFound, codeUnknownMessage, "Unknown Message")
		return
	}
	if rec.m.Author == nil || rec.m.Author.ID != s.opts.BotUserID {
		if p.Content != nil || p.Embeds != nil || p.Components != nil || p.Attachments != nil || len(files) > 0 {
			w.apiError(http.StatusForbidden, codeNotAuthor, "Cannot edit a message authored by another user")
			return
		}
	}
	if !s.editRecordLocked(w, rec, p, files, messageFlagsSettable) {
		return
	}
	w.json(http.StatusOK, messageJSON(rec.m, nil))
}

// editRecordLocked applies an edit to a copy, refuses an edit that would
// leave the message empty, then stores it and dispatches MESSAGE_UPDATE.
func (s *Server) editRecordLocked(w *response, rec *msgRec, p *messagePayload, files []upload, flags discordgo.MessageFlags) bool {
	nm := copyMessage(rec.m)
	normalizeMessage(nm)
	loading := nm.Flags&discordgo.MessageFlagsLoading != 0
	s.applyPayloadLocked(nm, p, files, flags)
	if isEmptyMessage(nm) {
		w.apiError(http.StatusBadRequest, codeEmptyMessage, "Cannot send an empty message")
		return false
	}
	if loading {
		// Filling a deferred ("thinking") response is not an edit.
		nm.Flags &^= discordgo.MessageFlagsLoading
	} else {
		now := time.Now().UTC()
		nm.EditedTimestamp = &now
	}
	rec.m = nm
	s.messageEventLocked("MESSAGE_UPDATE", rec)
	s.notifyLocked()
	return true
}

func (s *Server) deleteMessage(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, rec := s.channelMessageOr404(w, q)
	if rec == nil {
		return
	}
	s.deleteMessageLocked(rec)
	s.notifyLocked()
	w.noContent()
}

func (s *Server) typing(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channelOr404(w, q.params["ch"]) != nil {
		w.noContent()
	}
}

func (s *Server) getChannel(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.channelOr404(w, q.params["ch"]); ch != nil {
		w.json(http.StatusOK, s.channelJSON(ch.ch))
	}
}

var archiveDurations = map[int]bool{60: true, 1440: true, 4320: true, 10080: true}

func (s *Server) editChannel(w *response, q *restReq) {
	var e struct {
		Name                *string `json:"name"`
		Topic               *string `json:"topic"`
		Archived            *bool   `json:"archived"`
		Locked              *bool   `json:"locked"`
		Invitable           *bool   `json:"invitable"`
		AutoArchiveDuration *int    `json:"auto_archive_duration"`
	}
	if !decodeBody(w, q.body, &e) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channelOr404(w, q.params["ch"])
	if ch == nil {
		return
	}
	c := ch.ch
	fe := &formErrors{}
	if e.Name != nil {
		if n := utf8.RuneCountInString(*e.Name); n < 1 || n > 100 {
			fe.add("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
	}
	if e.Topic != nil && utf8.RuneCountInString(*e.Topic) > 1024 {
		fe.add("topic", "BASE_TYPE_MAX_LENGTH", "Must be 1024 or fewer in length.")
	}
	if e.AutoArchiveDuration != nil && !archiveDurations[*e.AutoArchiveDuration] {
		fe.add("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
	}
	if fe.failed() {
		w.formError(fe)
		return
	}
	if e.Name != nil {
		c.Name = *e.Name
	}
	if c.IsThread() {
		md := c.ThreadMetadata
		if e.Archived != nil && *e.Archived != md.Archived {
			md.Archived = *e.Archived
			md.ArchiveTimestamp = time.Now().UTC()
		}
		if e.Locked != nil {
			md.Locked = *e.Locked
		}
		if e.Invitable != nil {
			md.Invitable = *e.Invitable
		}
		if e.AutoArchiveDuration != nil {
			md.AutoArchiveDuration = *e.AutoArchiveDuration
		}
		s.dispatchLocked(&event{t: "THREAD_UPDATE", data: s.channelJSON(c), intent: discordgo.IntentGuilds})
	} else {
		if e.Topic != nil {
			c.Topic = *e.Topic
		}
		s.dispatchLocked(&event{t: "CHANNEL_UPDATE", data: s.channelJSON(c), intent: discordgo.IntentGuilds})
	}
	s.notifyLocked()
	w.json(http.StatusOK, s.channelJSON(c))
}

type threadStart struct {
	Name                *string `json:"name"`
	AutoArchiveDuration int     `json:"auto_archive_duration"`
	Type                int     `json:"type"`
	Invitable           *bool   `json:"invitable"`
	RateLimitPerUser    int     `json:"rate_limit_per_user"`
}

func (t *threadStart) validate(fe *formErrors) {
	name := ""
	if t.Name != nil {
		name = *t.Name
	}
	if n := utf8.RuneCountInString(name); n < 1 || n > 100 {
		fe.add("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	if t.AutoArchiveDuration != 0 && !archiveDurations[t.AutoArchiveDuration] {
		fe.add("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
	}
}

// newThreadLocked creates and announces a thread of the given parent.
func (s *Server) newThreadLocked(id, parentID string, typ discordgo.ChannelType, t *threadStart) *discordgo.Channel {
	now := time.Now().UTC()
	aad := t.AutoArchiveDuration
	if aad == 0 {
		aad = 1440
	}
	invitable := true
	if t.Invitable != nil {
		invitable = *t.Invitable
	}
	th := &discordgo.Channel{
		ID:               id,
		GuildID:          s.opts.GuildID,
		ParentID:         parentID,
		Name:             *t.Name,
		Type:             typ,
		OwnerID:          s.opts.BotUserID,
		RateLimitPerUser: t.RateLimitPerUser,
		MemberCount:      1,
		ThreadMetadata:   &discordgo.ThreadMetadata{AutoArchiveDuration: aad, ArchiveTimestamp: now, Invitable: invitable},
		Member:           &discordgo.ThreadMember{ID: id, UserID: s.opts.BotUserID, JoinTimestamp: now},
	}
	s.channels[id] = &chanRec{ch: th, nonces: make(map[string]nonceRec)}
	s.threadOrder = append(s.threadOrder, id)
	var m map[string]any
	_ = json.Unmarshal(s.channelJSON(th), &m)
	m["newly_created"] = true
	b, _ := json.Marshal(m)
	s.dispatchLocked(&event{t: "THREAD_CREATE", data: b, intent: discordgo.IntentGuilds})
	return th
}

func (s *Server) startThreadFromMessage(w *response, q *restReq) {
	var t threadStart
	if !decodeBody(w, q.body, &t) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, rec := s.channelMessageOr404(w, q)
	if rec == nil {
		return
	}
	if ch.ch.IsThread() {
		w.apiError(http.StatusBadRequest, codeWrongChannelType, "Cannot execute action on this channel type")
		return
	}
	if s.channels[rec.m.ID] != nil {
		w.apiError(http.StatusBadRequest, codeThreadAlreadyCreated, "A thread has already been created for this message")
		return
	}
	fe := &formErrors{}
	t.validate(fe)
	if fe.failed() {
		w.formError(fe)
		return
	}
	th := s.newThreadLocked(rec.m.ID, ch.ch.ID, discordgo.ChannelTypeGuildPublicThread, &t)
	nm := copyMessage(rec.m)
	nm.Flags |= discordgo.MessageFlagsHasThread
	nm.Thread = copyChannel(th)
	rec.m = nm
	s.notifyLocked()
	w.json(http.StatusCreated, s.channelJSON(th))
}

func (s *Server) startThread(w *response, q *restReq) {
	t := threadStart{Type: int(discordgo.ChannelTypeGuildPrivateThread)} // the API v9 default
	if !decodeBody(w, q.body, &t) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channelOr404(w, q.params["ch"])
	if ch == nil {
		return
	}
	if ch.ch.IsThread() {
		w.apiError(http.StatusBadRequest, codeWrongChannelType, "Cannot execute action on this channel type")
		return
	}
	fe := &formErrors{}
	t.validate(fe)
	typ := discordgo.ChannelType(t.Type)
	if typ != discordgo.ChannelTypeGuildPublicThread && typ != discordgo.ChannelTypeGuildPrivateThread {
		fe.add("type", "BASE_TYPE_CHOICES", "Value must be one of {11, 12}.")
	}
	if fe.failed() {
		w.formError(fe)
		return
	}
	th := s.newThreadLocked(s.newIDLocked(), ch.ch.ID, typ, &t)
	if typ == discordgo.ChannelTypeGuildPublicThread {
		// Discord announces a public thread started without a message with a
		// THREAD_CREATED system message in the parent channel.
		m := s.newMessageLocked(ch.ch.ID, s.botUser())
		m.Type = discordgo.MessageTypeThreadCreated
		m.Content = th.Name
		m.MessageReference = &discordgo.MessageReference{ChannelID: th.ID, GuildID: s.opts.GuildID}
		rec := &msgRec{m: m}
		s.storeMessageLocked(ch, rec)
		s.messageEventLocked("MESSAGE_CREATE", rec)
	}
	s.notifyLocked()
	w.json(http.StatusCreated, s.channelJSON(th))
}

var mentionRE = regexp.MustCompile(`<@!?(\d+)>`)

// SendMessage posts a message as a user (DefaultUserID unless m.Author is
// set) and dispatches MESSAGE_CREATE. It fills the id, timestamp, guild id,
// channel (the first channel if empty), member and the mentions found in
// the content. Without the MESSAGE_CONTENT intent the client receives the
// message with content, embeds, attachments and components blanked unless
// it mentions the bot, as on Discord. It panics if the channel does not
// exist. It returns a copy of the stored message.
func (s *Server) SendMessage(m *discordgo.Message) *discordgo.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := copyMessage(m)
	if msg.ChannelID == "" {
		msg.ChannelID = s.channelOrder[0]
	}
	ch := s.channels[msg.ChannelID]
	if ch == nil {
		panic(fmt.Sprintf("discordtest: SendMessage to unknown channel %q", msg.ChannelID))
	}
	msg.ID = s.newIDLocked()
	msg.GuildID = s.opts.GuildID
	if msg.Timestamp.IsZero() {
		msg.Timestamp = time.Now().UTC()
	}
	if msg.Author == nil {
		msg.Author = defaultUser()
	}
	if msg.Member == nil {
		msg.Member = &discordgo.Member{Roles: []string{}, JoinedAt: msg.Timestamp}
	}
	normalizeMessage(msg)
	for _, sm := range mentionRE.FindAllStringSubmatch(msg.Content, -1) {
		found := false
		for _, u := range msg.Mentions {
			found = found || (u != nil && u.ID == sm[1])
		}
		if !found {
			u := &discordgo.User{ID: sm[1]}
			switch sm[1] {
			case s.opts.BotUserID:
				u = s.botUser()
			case DefaultUserID:
				u = defaultUser()
			}
			msg.Mentions = append(msg.Mentions, u)
		}
	}
	rec := &msgRec{m: msg}
	s.storeMessageLocked(ch, rec)
	s.messageEventLocked("MESSAGE_CREATE", rec)
	s.notifyLocked()
	return copyMessage(msg)
}

// Messages returns every message now in a channel or thread, oldest first,
// as the channel's history shows it: edits applied, deleted and ephemeral
// messages left out, bot messages with their components. Attachment bytes
// are available through Attachment.
func (s *Server) Messages(channelID string) []*discordgo.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[channelID]
	if ch == nil {
		return nil
	}
	out := make([]*discordgo.Message, len(ch.msgs))
	for i, r := range ch.msgs {
		out[i] = copyMessage(r.m)
	}
	return out
}

// Message returns a message by id, including ephemeral interaction
// responses; false if there is none or it was deleted.
func (s *Server) Message(id string) (*discordgo.Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.messages[id]
	if rec == nil || rec.deleted {
		return nil, false
	}
	return copyMessage(rec.m), true
}

// WaitMessages waits until the channel or thread holds at least n messages
// and returns them.
func (s *Server) WaitMessages(ctx context.Context, channelID string, n int) ([]*discordgo.Message, error) {
	var msgs []*discordgo.Message
	err := s.WaitFor(ctx, func() bool {
		msgs = s.Messages(channelID)
		return len(msgs) >= n
	})
	return msgs, err
}

// Attachment returns the bytes uploaded for an attachment id.
func (s *Server) Attachment(id string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.attachments[id]
	return append([]byte(nil), b...), ok
}

// Threads returns the threads created so far, oldest first.
func (s *Server) Threads() []*discordgo.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*discordgo.Channel, len(s.threadOrder))
	for i, id := range s.threadOrder {
		out[i] = copyChannel(s.channels[id].ch)
	}
	return out
}

// Thread returns a thread by id.
func (s *Server) Thread(id string) (*discordgo.Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[id]
	if ch == nil || !ch.ch.IsThread() {
		return nil, false
	}
	return copyChannel(ch.ch), true
}

// Channel returns a text channel or thread by id.
func (s *Server) Channel(id string) (*discordgo.Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[id]
	if ch == nil {
		return nil, false
	}
	return copyChannel(ch.ch), true
}
