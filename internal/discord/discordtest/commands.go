package discordtest

import (
	"encoding/json"
	"net/http"

	"github.com/bwmarrin/discordgo"
)

// commandScope resolves the application (and guild) of a commands route.
// It answers 403 50001 for another application or guild and reports false.
func (s *Server) commandScope(w *response, q *restReq) (list *[]*discordgo.ApplicationCommand, guildID string, ok bool) {
	if q.params["app"] != s.opts.ApplicationID {
		w.apiError(http.StatusForbidden, codeMissingAccess, "Missing Access")
		return nil, "", false
	}
	if g, isGuild := q.params["guild"]; isGuild {
		if g != s.opts.GuildID {
			w.apiError(http.StatusForbidden, codeMissingAccess, "Missing Access")
			return nil, "", false
		}
		return &s.guildCommands, g, true
	}
	return &s.globalCommands, "", true
}

func (s *Server) listCommands(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, _, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	out := make([]*discordgo.ApplicationCommand, len(*list))
	copy(out, *list)
	w.json(http.StatusOK, out)
}

// decodeCommands validates and decodes a command list (a bulk overwrite
// body) or a single command. It answers the error itself and reports false.
func decodeCommands(w *response, body []byte, single bool) ([]*discordgo.ApplicationCommand, bool) {
	var generic []map[string]any
	var typed []*discordgo.ApplicationCommand
	var err error
	if single {
		var one map[string]any
		if err = json.Unmarshal(body, &one); err == nil && one != nil {
			generic = []map[string]any{one}
		}
	} else {
		err = json.Unmarshal(body, &generic)
	}
	if err != nil || (single && generic == nil) {
		w.apiError(http.StatusBadRequest, codeInvalidJSON, "The request body contains invalid JSON.")
		return nil, false
	}
	fe := &formErrors{}
	validateCommands(fe, generic, single)
	if fe.failed() {
		w.formError(fe)
		return nil, false
	}
	if single {
		var one discordgo.ApplicationCommand
		err = json.Unmarshal(body, &one)
		typed = []*discordgo.ApplicationCommand{&one}
	} else {
		err = json.Unmarshal(body, &typed)
	}
	if err != nil {
		fe.add("", "MODEL_TYPE_CONVERT", err.Error())
		w.formError(fe)
		return nil, false
	}
	return typed, true
}

// storeCommandLocked fills the server-assigned fields, keeping the id of an
// existing command with the same type and name, as Discord does.
func (s *Server) storeCommandLocked(c *discordgo.ApplicationCommand, existing []*discordgo.ApplicationCommand, guildID string) *discordgo.ApplicationCommand {
	if c.Type == 0 {
		c.Type = discordgo.ChatApplicationCommand
	}
	c.ID = ""
	for _, e := range existing {
		if e.Type == c.Type && e.Name == c.Name {
			c.ID = e.ID
		}
	}
	if c.ID == "" {
		c.ID = s.newIDLocked()
	}
	c.ApplicationID = s.opts.ApplicationID
	c.GuildID = guildID
	c.Version = s.newIDLocked()
	return c
}

func (s *Server) overwriteCommands(w *response, q *restReq) {
	cmds, ok := decodeCommands(w, q.body, false)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list, guildID, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	out := make([]*discordgo.ApplicationCommand, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, s.storeCommandLocked(c, *list, guildID))
	}
	*list = out
	if guildID != "" {
		s.commandWrites++
	}
	s.notifyLocked()
	w.json(http.StatusOK, out)
}

func (s *Server) createCommand(w *response, q *restReq) {
	cmds, ok := decodeCommands(w, q.body, true)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list, guildID, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	c := s.storeCommandLocked(cmds[0], *list, guildID)
	status := http.StatusCreated
	for i, e := range *list {
		if e.ID == c.ID {
			(*list)[i] = c
			status = http.StatusOK
		}
	}
	if status == http.StatusCreated {
		*list = append(*list, c)
	}
	s.notifyLocked()
	w.json(status, c)
}

func findCommand(list []*discordgo.ApplicationCommand, id string) int {
	for i, c := range list {
		if c.ID == id {
			return i
		}
	}
	return -1
}

func (s *Server) getCommand(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, _, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	i := findCommand(*list, q.params["cmd"])
	if i < 0 {
		w.apiError(http.StatusNotFound, codeUnknownCommand, "Unknown application command")
		return
	}
	w.json(http.StatusOK, (*list)[i])
}

func (s *Server) editCommand(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, guildID, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	i := findCommand(*list, q.params["cmd"])
	if i < 0 {
		w.apiError(http.StatusNotFound, codeUnknownCommand, "Unknown application command")
		return
	}
	// Merge the edit into the stored command, then validate the result.
	var merged map[string]any
	old, _ := json.Marshal((*list)[i])
	_ = json.Unmarshal(old, &merged)
	var patch map[string]any
	if err := json.Unmarshal(q.body, &patch); err != nil {
		w.apiError(http.StatusBadRequest, codeInvalidJSON, "The request body contains invalid JSON.")
		return
	}
	for k, v := range patch {
		merged[k] = v
	}
	body, _ := json.Marshal(merged)
	cmds, ok := decodeCommands(w, body, true)
	if !ok {
		return
	}
	others := append(append([]*discordgo.ApplicationCommand(nil), (*list)[:i]...), (*list)[i+1:]...)
	for _, o := range others {
		if o.Type == cmds[0].Type && o.Name == cmds[0].Name {
			fe := &formErrors{}
			fe.add("name", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
			w.formError(fe)
			return
		}
	}
	c := cmds[0]
	id := (*list)[i].ID
	c.Type = (*list)[i].Type
	c.ID = id
	c.ApplicationID = s.opts.ApplicationID
	c.GuildID = guildID
	c.Version = s.newIDLocked()
	(*list)[i] = c
	s.notifyLocked()
	w.json(http.StatusOK, c)
}

func (s *Server) deleteCommand(w *response, q *restReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, _, ok := s.commandScope(w, q)
	if !ok {
		return
	}
	i := findCommand(*list, q.params["cmd"])
	if i < 0 {
		w.apiError(http.StatusNotFound, codeUnknownCommand, "Unknown application command")
		return
	}
	*list = append((*list)[:i:i], (*list)[i+1:]...)
	s.notifyLocked()
	w.noContent()
}

// Commands returns the guild's registered commands (after the last bulk
// overwrite and any single-command changes), with the ids the fake
// assigned.
func (s *Server) Commands() []*discordgo.ApplicationCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCommands(s.guildCommands)
}

// GlobalCommands returns the application's global commands (none unless
// the client registered some).
func (s *Server) GlobalCommands() []*discordgo.ApplicationCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCommands(s.globalCommands)
}

func copyCommands(in []*discordgo.ApplicationCommand) []*discordgo.ApplicationCommand {
	out := make([]*discordgo.ApplicationCommand, len(in))
	for i, c := range in {
		out[i] = copyCommand(c)
	}
	return out
}

// CommandWrites returns how many guild bulk overwrites succeeded.
func (s *Server) CommandWrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commandWrites
}
