package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// decodeRequest decodes a body as far as it can; the error is OpenAI's
// answer to a body that does not decode.
func decodeRequest(raw []byte) (wireRequest, *apiError) {
	var wr wireRequest
	err := json.Unmarshal(raw, &wr)
	if err == nil {
		return wr, nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return wr, badRequest(fmt.Sprintf("Invalid type for body: expected an object, but got %s instead.", article(typeErr.Value)), "").withCode("invalid_type")
		}
		return wr, badRequest(fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", typeErr.Field, goKind(typeErr.Type), article(typeErr.Value)), typeErr.Field).withCode("invalid_type")
	}
	return wr, badRequest("We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.", "")
}

// record converts a decoded body to its Request.
func (wr *wireRequest) record(raw []byte) Request {
	r := Request{
		Model:      wr.Model,
		ToolChoice: cloneBytes(wr.ToolChoice),
		MaxTokens:  wr.MaxCompletionTokens,
		Raw:        cloneBytes(raw),
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = wr.MaxTokens
	}
	for _, m := range wr.Messages {
		text, _, _ := contentText(m.Content)
		msg := Message{Role: m.Role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		r.Messages = append(r.Messages, msg)
	}
	for _, t := range wr.Tools {
		if t.Function == nil {
			r.Tools = append(r.Tools, Tool{})
			continue
		}
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: cloneBytes(t.Function.Parameters)})
	}
	return r
}

// contentText returns a message content's text and whether it is present
// (neither absent nor null); kind is the JSON kind of a content that is
// neither a string nor an array of objects, else empty.
func contentText(raw json.RawMessage) (text string, present bool, kind string) {
	if isNull(raw) {
		return "", false, ""
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, true, ""
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", true, jsonKind(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true, ""
}

// validate checks a decoded body as OpenAI does, model availability aside.
func (wr *wireRequest) validate() *apiError {
	if wr.Model == "" {
		return badRequest("you must provide a model parameter", "")
	}
	if wr.Stream {
		return badRequest("llmtest: streaming is not supported by this fake", "stream")
	}
	if e := wr.validateTools(); e != nil {
		return e
	}
	return wr.validateMessages()
}

func (wr *wireRequest) validateTools() *apiError {
	names := make(map[string]bool, len(wr.Tools))
	for i, t := range wr.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type == "" {
			return missing(p + ".type")
		}
		if t.Type != "function" {
			return badRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", t.Type), p+".type").withCode("invalid_value")
		}
		if t.Function == nil {
			return missing(p + ".function")
		}
		name := t.Function.Name
		switch {
		case name == "":
			return missing(p + ".function.name")
		case len(name) > 64:
			return badRequest(fmt.Sprintf("Invalid '%s.function.name': string too long. Expected a string with maximum length 64, but got a string with length %d instead.", p, len(name)), p+".function.name").withCode("string_above_max_length")
		case !toolNamePattern.MatchString(name):
			return badRequest(fmt.Sprintf("Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", p), p+".function.name").withCode("invalid_value")
		}
		if params := t.Function.Parameters; !isNull(params) {
			var schema map[string]json.RawMessage
			if err := json.Unmarshal(params, &schema); err != nil {
				return badRequest(fmt.Sprintf("Invalid type for '%s.function.parameters': expected an object, but got %s instead.", p, article(jsonKind(params))), p+".function.parameters").withCode("invalid_type")
			}
			if typ := schema["type"]; !bytes.Equal(bytes.TrimSpace(typ), []byte(`"object"`)) {
				got := "None"
				if len(typ) > 0 {
					got = strings.Trim(string(bytes.TrimSpace(typ)), `"`)
				}
				return badRequest(fmt.Sprintf("Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%s\"'.", name, got), p+".function.parameters").withCode("invalid_function_parameters")
			}
		}
		names[name] = true
	}
	if isNull(wr.ToolChoice) {
		return nil
	}
	if len(wr.Tools) == 0 {
		return badRequest("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", "tool_choice")
	}
	var mode string
	if err := json.Unmarshal(wr.ToolChoice, &mode); err == nil {
		switch mode {
		case "none", "auto", "required":
			return nil
		}
		return badRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", mode), "tool_choice").withCode("invalid_value")
	}
	var choice struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(wr.ToolChoice, &choice); err != nil {
		return badRequest(fmt.Sprintf("Invalid type for 'tool_choice': expected one of a string or an object, but got %s instead.", article(jsonKind(wr.ToolChoice))), "tool_choice").withCode("invalid_type")
	}
	if choice.Type != "function" {
		return badRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", choice.Type), "tool_choice.type").withCode("invalid_value")
	}
	if !names[choice.Function.Name] {
		return badRequest(fmt.Sprintf("Invalid value for 'tool_choice': function '%s' is not among 'tools'.", choice.Function.Name), "tool_choice.function.name").withCode("invalid_value")
	}
	return nil
}

func (wr *wireRequest) validateMessages() *apiError {
	if wr.Messages == nil {
		return missing("messages")
	}
	if len(wr.Messages) == 0 {
		return badRequest("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages").withCode("empty_array")
	}
	// The assistant message whose tool calls the following tool messages
	// answer: its index (-1 for none), call IDs and those unanswered.
	callsFrom := -1
	var calls []string
	unanswered := map[string]bool{}
	closeCalls := func() *apiError {
		if callsFrom < 0 {
			return nil
		}
		var ids []string
		for _, id := range calls {
			if unanswered[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			return badRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(ids, ", "), fmt.Sprintf("messages.[%d].role", callsFrom))
		}
		callsFrom, calls = -1, nil
		return nil
	}
	for i, m := range wr.Messages {
		p := fmt.Sprintf("messages.[%d]", i)
		_, hasContent, kind := contentText(m.Content)
		if kind != "" {
			return badRequest(fmt.Sprintf("Invalid type for '%s.content': expected one of a string or array of objects, but got %s instead.", p, article(kind)), p+".content").withCode("invalid_type")
		}
		if m.Role != "tool" {
			if e := closeCalls(); e != nil {
				return e
			}
		}
		switch m.Role {
		case "system", "developer", "user":
			if !hasContent {
				return missing(p + ".content")
			}
		case "assistant":
			if !hasContent && len(m.ToolCalls) == 0 {
				return missing(p + ".content")
			}
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
				switch {
				case c.ID == "":
					return missing(cp + ".id")
				case c.Type == "":
					return missing(cp + ".type")
				case c.Type != "function":
					return badRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", c.Type), cp+".type").withCode("invalid_value")
				case c.Function.Name == "":
					return missing(cp + ".function.name")
				}
				calls = append(calls, c.ID)
				unanswered[c.ID] = true
			}
			if len(m.ToolCalls) > 0 {
				callsFrom = i
			}
		case "tool":
			if m.ToolCallID == "" {
				return missing(p + ".tool_call_id")
			}
			if callsFrom < 0 {
				return badRequest("Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.", p+".role")
			}
			if !contains(calls, m.ToolCallID) {
				return badRequest(fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", m.ToolCallID), p+".tool_call_id")
			}
			delete(unanswered, m.ToolCallID)
			if !hasContent {
				return missing(p + ".content")
			}
		case "":
			return missing(p + ".role")
		default:
			return badRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", m.Role), p+".role").withCode("invalid_value")
		}
	}
	return closeCalls()
}

func missing(param string) *apiError {
	return badRequest(fmt.Sprintf("Missing required parameter: '%s'.", param), param).withCode("missing_required_parameter")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// jsonKind names the JSON kind of a valid value as encoding/json does.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "null"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// article phrases an encoding/json kind ("string", "number", ...) as OpenAI
// does ("a string", "a number", ...).
func article(kind string) string {
	switch kind {
	case "array", "object", "integer":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	if strings.HasPrefix(kind, "number") { // "number 1.5" for an integer field
		return "a number"
	}
	return "a " + kind
}

// goKind phrases the Go type a field decodes into as a JSON kind.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
