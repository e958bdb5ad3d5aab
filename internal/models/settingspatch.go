package models

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// SettingsPatch is a JSON merge patch (RFC 7396) of a project's
// settings: each key sets that setting to its value, a null removes it
// (back to its default), and a setting the patch does not name is kept.
// Keys are the JSON names of ProjectSettings' fields.
type SettingsPatch map[string]json.RawMessage

// SettingKind is the type of a project setting's value.
type SettingKind string

// The kinds of project settings.
const (
	SettingString SettingKind = "string"
	SettingBool   SettingKind = "boolean"
	SettingList   SettingKind = "list of strings"
	// SettingDuration is a duration string such as "90s" or "4h".
	SettingDuration SettingKind = "duration"
)

// SettingKinds maps each project setting's key to its kind.
var SettingKinds = settingKinds()

func settingKinds() map[string]SettingKind {
	out := map[string]SettingKind{}
	t := reflect.TypeFor[ProjectSettings]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type == reflect.TypeFor[Duration]() {
			out[name] = SettingDuration
			continue
		}
		switch f.Type.Kind() {
		case reflect.String:
			out[name] = SettingString
		case reflect.Bool:
			out[name] = SettingBool
		case reflect.Slice:
			out[name] = SettingList
		default:
			panic("models: project setting " + name + " has a kind SettingKinds does not know")
		}
	}
	return out
}

// SettingKeys returns the project settings' keys, sorted.
func SettingKeys() []string {
	keys := make([]string, 0, len(SettingKinds))
	for k := range SettingKinds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ReplaceSettings returns the patch that makes a project's settings equal
// s: every key set, those s leaves empty to null.
func ReplaceSettings(s ProjectSettings) SettingsPatch {
	out := SettingsPatch{}
	for k := range SettingKinds {
		out[k] = json.RawMessage("null")
	}
	data, err := json.Marshal(s)
	if err != nil {
		panic("models: encode project settings: " + err.Error())
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(data, &set); err != nil {
		panic("models: decode project settings: " + err.Error())
	}
	for k, v := range set {
		out[k] = v
	}
	return out
}

// Apply returns s with the patch merged into it. A key that is not a
// setting, or a value of the wrong type, is an error naming the key
// ("settings.pr_mode"); the result is not validated.
func (sp SettingsPatch) Apply(s ProjectSettings) (ProjectSettings, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return s, WrapError(CodeInternal, err, "encode settings")
	}
	cur := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &cur); err != nil {
		return s, WrapError(CodeInternal, err, "decode settings")
	}
	keys := make([]string, 0, len(sp))
	for k := range sp {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		kind, ok := SettingKinds[k]
		if !ok {
			return s, Errorf(CodeInvalid, "settings.%s: no such setting (settings are %s)", cutRunes(k, 64),
				strings.Join(SettingKeys(), ", "))
		}
		v := bytes.TrimSpace(sp[k])
		if len(v) == 0 || bytes.Equal(v, []byte("null")) {
			delete(cur, k)
			continue
		}
		if err := checkSettingValue(kind, v); err != nil {
			return s, Errorf(CodeInvalid, "settings.%s: want a %s (got %s)", k, kind, cutRunes(string(v), 64))
		}
		cur[k] = json.RawMessage(v)
	}
	merged, err := json.Marshal(cur)
	if err != nil {
		return s, WrapError(CodeInternal, err, "encode settings")
	}
	var out ProjectSettings
	if err := json.Unmarshal(merged, &out); err != nil {
		return s, WrapError(CodeInvalid, err, "settings: %v", err)
	}
	return out, nil
}

// checkSettingValue checks that the JSON value v is of kind.
func checkSettingValue(kind SettingKind, v json.RawMessage) error {
	var target any
	switch kind {
	case SettingString:
		target = new(string)
	case SettingBool:
		target = new(bool)
	case SettingDuration:
		target = new(Duration)
	default:
		target = new([]string)
	}
	return json.Unmarshal(v, target)
}
