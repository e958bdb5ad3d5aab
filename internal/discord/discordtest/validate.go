package discordtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// messagePayload is the body of message create/edit requests, webhook
// executions and interaction callback data. Pointer fields distinguish
// "absent or null" (nil) from "set".
type messagePayload struct {
	Content          *string                                      `json:"content"`
	Embeds           *[]*discordgo.MessageEmbed                   `json:"embeds"`
	Components       *[]json.RawMessage                           `json:"components"`
	Attachments      *[]attachmentRef                             `json:"attachments"`
	Flags            *discordgo.MessageFlags                      `json:"flags"`
	TTS              bool                                         `json:"tts"`
	Nonce            json.RawMessage                              `json:"nonce"`
	EnforceNonce     bool                                         `json:"enforce_nonce"`
	MessageReference *discordgo.MessageReference                  `json:"message_reference"`
	StickerIDs       []string                                     `json:"sticker_ids"`
	Poll             json.RawMessage                              `json:"poll"`
	Choices          *[]*discordgo.ApplicationCommandOptionChoice `json:"choices"`
	CustomID         *string                                      `json:"custom_id"`
	Title            *string                                      `json:"title"`
}

// attachmentRef is an entry of "attachments" in a request: an existing
// attachment to keep (id is its snowflake) or metadata for files[n] (id n).
type attachmentRef struct {
	ID          json.RawMessage `json:"id"`
	Filename    string          `json:"filename"`
	Description string          `json:"description"`
}

func (a attachmentRef) id() string {
	var s string
	if json.Unmarshal(a.ID, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(a.ID))
}

func (p *messagePayload) content() string {
	if p.Content == nil {
		return ""
	}
	return *p.Content
}

func (p *messagePayload) hasPoll() bool {
	return len(p.Poll) > 0 && string(p.Poll) != "null"
}

// nonceKey validates the nonce (an integer or a string of at most 25
// characters) and returns it as a string; "" when absent.
func (p *messagePayload) nonceKey(fe *formErrors) string {
	if len(p.Nonce) == 0 || string(p.Nonce) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(p.Nonce, &s) == nil {
		if utf8.RuneCountInString(s) > 25 {
			fe.add("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
		}
		return "s:" + s
	}
	var n json.Number
	if json.Unmarshal(p.Nonce, &n) == nil {
		if _, err := n.Int64(); err == nil {
			return "n:" + n.String()
		}
	}
	fe.add("nonce", "NONCE_TYPE_INVALID", "Nonce must be an integer or a string.")
	return ""
}

// validateMessage checks the limits Discord enforces on message content.
// prefix is prepended to error paths ("data" for interaction callbacks).
func validateMessage(fe *formErrors, prefix string, p *messagePayload, modal bool) {
	if n := utf8.RuneCountInString(p.content()); n > 2000 {
		fe.add(join(prefix, "content"), "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	if p.Embeds != nil {
		validateEmbeds(fe, join(prefix, "embeds"), *p.Embeds)
	}
	if p.Components != nil {
		flags := discordgo.MessageFlags(0)
		if p.Flags != nil {
			flags = *p.Flags
		}
		validateComponents(fe, join(prefix, "components"), *p.Components, modal, flags&discordgo.MessageFlagsIsComponentsV2 != 0)
	}
}

func validateEmbeds(fe *formErrors, path string, embeds []*discordgo.MessageEmbed) {
	if len(embeds) > 10 {
		fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
	}
	total := 0
	maxLen := func(p string, s string, n int) {
		c := utf8.RuneCountInString(s)
		total += c
		if c > n {
			fe.add(p, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", n))
		}
	}
	for i, e := range embeds {
		if e == nil {
			fe.add(join(path, i), "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
			continue
		}
		ep := join(path, i)
		maxLen(join(ep, "title"), e.Title, 256)
		maxLen(join(ep, "description"), e.Description, 4096)
		if e.Footer != nil {
			maxLen(join(ep, "footer", "text"), e.Footer.Text, 2048)
		}
		if e.Author != nil {
			maxLen(join(ep, "author", "name"), e.Author.Name, 256)
		}
		if len(e.Fields) > 25 {
			fe.add(join(ep, "fields"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
		}
		for j, f := range e.Fields {
			if f == nil {
				continue
			}
			maxLen(join(ep, "fields", j, "name"), f.Name, 256)
			maxLen(join(ep, "fields", j, "value"), f.Value, 1024)
		}
	}
	if total > 6000 {
		fe.add(path, "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000")
	}
}

func number(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// validateComponents checks message components (action rows of buttons and
// select menus) or, for modals, action rows holding one text input each.
func validateComponents(fe *formErrors, path string, raws []json.RawMessage, modal, v2 bool) {
	if modal {
		if len(raws) < 1 || len(raws) > 5 {
			fe.add(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
		}
	} else if len(raws) > 5 && !v2 {
		fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
	}
	customIDs := map[string]bool{}
	checkCustomID := func(p string, m map[string]any, required bool) {
		id, ok := str(m["custom_id"])
		switch {
		case !ok || id == "":
			if required {
				fe.add(join(p, "custom_id"), "BASE_TYPE_REQUIRED", "This field is required")
			}
		case utf8.RuneCountInString(id) > 100:
			fe.add(join(p, "custom_id"), "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
		case customIDs[id]:
			fe.add(join(p, "custom_id"), "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
		default:
			customIDs[id] = true
		}
	}
	for i, raw := range raws {
		rp := join(path, i)
		var row map[string]any
		if json.Unmarshal(raw, &row) != nil || row == nil {
			fe.add(rp, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
			continue
		}
		t, _ := number(row["type"])
		if t != int(discordgo.ActionsRowComponent) {
			if v2 && !modal {
				if _, err := discordgo.MessageComponentFromJSON(raw); err != nil {
					fe.add(join(rp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1, 9, 10, 12, 13, 14, 17).")
				}
				continue
			}
			fe.add(join(rp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
			continue
		}
		children, _ := row["components"].([]any)
		max := 5
		if modal {
			max = 1
		}
		if len(children) < 1 || len(children) > max {
			fe.add(join(rp, "components"), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", max))
		}
		for j, child := range children {
			cp := join(rp, "components", j)
			m, ok := child.(map[string]any)
			if !ok {
				fe.add(cp, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
				continue
			}
			ct, _ := number(m["type"])
			switch discordgo.ComponentType(ct) {
			case discordgo.ButtonComponent:
				if modal {
					fe.add(join(cp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (4,).")
					continue
				}
				style, _ := number(m["style"])
				if style < 1 || style > 6 {
					fe.add(join(cp, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6}.")
				}
				if label, _ := str(m["label"]); utf8.RuneCountInString(label) > 80 {
					fe.add(join(cp, "label"), "BASE_TYPE_MAX_LENGTH", "Must be 80 or fewer in length.")
				}
				switch style {
				case int(discordgo.LinkButton):
					if u, _ := str(m["url"]); u == "" {
						fe.add(join(cp, "url"), "BASE_TYPE_REQUIRED", "This field is required")
					}
					if id, _ := str(m["custom_id"]); id != "" {
						fe.add(join(cp, "custom_id"), "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED", "A link button cannot have a custom id")
					}
				case int(discordgo.PremiumButton):
				default:
					checkCustomID(cp, m, true)
				}
			case discordgo.SelectMenuComponent, discordgo.UserSelectMenuComponent, discordgo.RoleSelectMenuComponent,
				discordgo.MentionableSelectMenuComponent, discordgo.ChannelSelectMenuComponent:
				if modal {
					fe.add(join(cp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (4,).")
					continue
				}
				if len(children) > 1 {
					fe.add(join(rp, "components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width")
				}
				checkCustomID(cp, m, true)
				if ct == int(discordgo.SelectMenuComponent) {
					opts, _ := m["options"].([]any)
					if len(opts) < 1 || len(opts) > 25 {
						fe.add(join(cp, "options"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 25 in length.")
					}
				}
			case discordgo.TextInputComponent:
				if !modal {
					fe.add(join(cp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2, 3, 5, 6, 7, 8).")
					continue
				}
				checkCustomID(cp, m, true)
				label, _ := str(m["label"])
				if n := utf8.RuneCountInString(label); n < 1 || n > 45 {
					fe.add(join(cp, "label"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 45 in length.")
				}
				if style, _ := number(m["style"]); style != 1 && style != 2 {
					fe.add(join(cp, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2}.")
				}
				if v, _ := str(m["value"]); utf8.RuneCountInString(v) > 4000 {
					fe.add(join(cp, "value"), "BASE_TYPE_MAX_LENGTH", "Must be 4000 or fewer in length.")
				}
				if ph, _ := str(m["placeholder"]); utf8.RuneCountInString(ph) > 100 {
					fe.add(join(cp, "placeholder"), "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
				}
				for _, l := range []struct {
					name string
					min  int
				}{{"min_length", 0}, {"max_length", 1}} {
					n, ok := number(m[l.name])
					switch {
					case !ok:
					case n < l.min:
						fe.add(join(cp, l.name), "NUMBER_TYPE_MIN", fmt.Sprintf("int value should be greater than or equal to %d.", l.min))
					case n > 4000:
						fe.add(join(cp, l.name), "NUMBER_TYPE_MAX", "int value should be less than or equal to 4000.")
					}
				}
			default:
				fe.add(join(cp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2, 3, 4, 5, 6, 7, 8).")
			}
		}
	}
}

// Command names: CHAT_INPUT names match this and must be lower case.
var commandNameRE = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

func validateName(fe *formErrors, path, name string, chatInput bool) {
	n := utf8.RuneCountInString(name)
	if n < 1 || n > 32 {
		fe.add(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.")
		return
	}
	if chatInput && (!commandNameRE.MatchString(name) || strings.ToLower(name) != name) {
		fe.add(path, "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
	}
}

func validateDescription(fe *formErrors, path string, v any) {
	d, _ := str(v)
	if n := utf8.RuneCountInString(d); n < 1 || n > 100 {
		fe.add(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
}

// validateCommands checks a bulk overwrite body (or, with single, one
// command) the way Discord does, naming each offending field.
func validateCommands(fe *formErrors, cmds []map[string]any, single bool) {
	chat := 0
	seen := map[string]bool{}
	for i, c := range cmds {
		p := fmt.Sprint(i)
		if single {
			p = ""
		}
		typ := 1
		if v, ok := c["type"]; ok && v != nil {
			n, ok := number(v)
			if !ok || n < 1 || n > 4 {
				fe.add(join(p, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4}.")
				continue
			}
			typ = n
		}
		name, _ := str(c["name"])
		if _, ok := c["name"]; !ok {
			fe.add(join(p, "name"), "BASE_TYPE_REQUIRED", "This field is required")
		} else {
			validateName(fe, join(p, "name"), name, typ == 1)
		}
		key := fmt.Sprintf("%d/%s", typ, name)
		if seen[key] {
			fe.add(join(p, "name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
		}
		seen[key] = true
		opts, _ := c["options"].([]any)
		if typ == 1 {
			chat++
			validateDescription(fe, join(p, "description"), c["description"])
			validateOptions(fe, join(p, "options"), opts, 0)
		} else {
			if d, _ := str(c["description"]); d != "" {
				fe.add(join(p, "description"), "APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION", "Context menu commands cannot have description")
			}
			if len(opts) > 0 {
				fe.add(join(p, "options"), "APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS", "Context menu commands cannot have options")
			}
		}
	}
	if chat > 100 {
		fe.add("", "APPLICATION_COMMANDS_TOO_MANY", "Maximum number of application commands reached (100)")
	}
}

// validateOptions checks an options list at a nesting depth: 0 for the
// command, 1 inside a sub-command group or sub-command, 2 inside a
// sub-command of a group.
func validateOptions(fe *formErrors, path string, opts []any, depth int) {
	if len(opts) > 25 {
		fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	names := map[string]bool{}
	subs, others := 0, 0
	optionalSeen := false
	for i, o := range opts {
		op := join(path, i)
		m, ok := o.(map[string]any)
		if !ok {
			fe.add(op, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
			continue
		}
		typ, ok := number(m["type"])
		if !ok || typ < 1 || typ > 11 {
			fe.add(join(op, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}.")
			continue
		}
		name, _ := str(m["name"])
		validateName(fe, join(op, "name"), name, true)
		if names[name] {
			fe.add(join(op, "name"), "APPLICATION_COMMAND_OPTIONS_NAME_ALREADY_EXISTS", "Option names must be unique")
		}
		names[name] = true
		validateDescription(fe, join(op, "description"), m["description"])
		children, _ := m["options"].([]any)
		switch discordgo.ApplicationCommandOptionType(typ) {
		case discordgo.ApplicationCommandOptionSubCommandGroup:
			subs++
			if depth > 0 {
				fe.add(join(op, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command groups can only be nested in the command")
				continue
			}
			if len(children) == 0 {
				fe.add(join(op, "options"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 25 in length.")
			}
			for j, ch := range children {
				if cm, ok := ch.(map[string]any); ok {
					if t, _ := number(cm["type"]); t != int(discordgo.ApplicationCommandOptionSubCommand) {
						fe.add(join(op, "options", j, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command groups can only contain sub-commands")
					}
				}
			}
			validateOptions(fe, join(op, "options"), children, 1)
		case discordgo.ApplicationCommandOptionSubCommand:
			subs++
			if depth > 1 {
				fe.add(join(op, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-commands cannot be nested in sub-commands")
				continue
			}
			for j, ch := range children {
				if cm, ok := ch.(map[string]any); ok {
					if t, _ := number(cm["type"]); t == 1 || t == 2 {
						fe.add(join(op, "options", j, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-commands cannot contain sub-commands or groups")
					}
				}
			}
			validateOptions(fe, join(op, "options"), children, 2)
		default:
			others++
			if len(children) > 0 {
				fe.add(join(op, "options"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Only sub-commands and groups can have options")
			}
			required, _ := m["required"].(bool)
			if required && optionalSeen {
				fe.add(join(op, "required"), "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options")
			}
			if !required {
				optionalSeen = true
			}
			choices, _ := m["choices"].([]any)
			if auto, _ := m["autocomplete"].(bool); auto && len(choices) > 0 {
				fe.add(join(op, "autocomplete"), "APPLICATION_COMMAND_OPTION_AUTOCOMPLETE_CHOICES", "Autocomplete cannot be set with choices")
			}
			validateChoices(fe, join(op, "choices"), choices, typ)
		}
	}
	if subs > 0 && others > 0 {
		fe.add(path, "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command and sub-command group option types are mutually exclusive to all other types")
	}
}

func validateChoices(fe *formErrors, path string, choices []any, optType int) {
	if len(choices) == 0 {
		return
	}
	switch discordgo.ApplicationCommandOptionType(optType) {
	case discordgo.ApplicationCommandOptionString, discordgo.ApplicationCommandOptionInteger, discordgo.ApplicationCommandOptionNumber:
	default:
		fe.add(path, "APPLICATION_COMMAND_OPTION_CHOICES_INVALID", "Only string, integer and number options can have choices")
		return
	}
	if len(choices) > 25 {
		fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	for i, c := range choices {
		cp := join(path, i)
		m, ok := c.(map[string]any)
		if !ok {
			fe.add(cp, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
			continue
		}
		name, _ := str(m["name"])
		if n := utf8.RuneCountInString(name); n < 1 || n > 100 {
			fe.add(join(cp, "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
		switch v := m["value"].(type) {
		case string:
			if optType != int(discordgo.ApplicationCommandOptionString) {
				fe.add(join(cp, "value"), "NUMBER_TYPE_COERCE", "Value is not a number.")
			} else if utf8.RuneCountInString(v) > 100 {
				fe.add(join(cp, "value"), "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
			}
		case float64:
			if optType == int(discordgo.ApplicationCommandOptionString) {
				fe.add(join(cp, "value"), "BASE_TYPE_STRING", "Must be a string.")
			} else if optType == int(discordgo.ApplicationCommandOptionInteger) && v != float64(int64(v)) {
				fe.add(join(cp, "value"), "NUMBER_TYPE_COERCE", "Value is not an integer.")
			}
		default:
			fe.add(join(cp, "value"), "BASE_TYPE_REQUIRED", "This field is required")
		}
	}
}
