package discordtest

import (
	"encoding/json"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// discordgo's Message, Interaction and ModalSubmitInteractionData do not
// encode their components (the fields are tagged "-"), so the fake encodes
// them itself.

type wireMessage struct {
	*discordgo.Message
	Components []discordgo.MessageComponent `json:"components"`
	Nonce      json.RawMessage              `json:"nonce,omitempty"`
}

func messageJSON(m *discordgo.Message, nonce json.RawMessage) json.RawMessage {
	comps := m.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	b, err := json.Marshal(wireMessage{Message: m, Components: comps, Nonce: nonce})
	if err != nil {
		panic("discordtest: encoding message: " + err.Error())
	}
	return b
}

// copyMessage returns a deep copy by a round trip through the wire format.
func copyMessage(m *discordgo.Message) *discordgo.Message {
	var out discordgo.Message
	if err := json.Unmarshal(messageJSON(m, nil), &out); err != nil {
		panic("discordtest: copying message: " + err.Error())
	}
	return &out
}

func copyChannel(c *discordgo.Channel) *discordgo.Channel {
	var out discordgo.Channel
	mustRoundTrip(c, &out)
	return &out
}

func copyCommand(c *discordgo.ApplicationCommand) *discordgo.ApplicationCommand {
	var out discordgo.ApplicationCommand
	mustRoundTrip(c, &out)
	return &out
}

func mustRoundTrip(in, out any) {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(fmt.Sprintf("discordtest: copying %T: %v", in, err))
	}
}

// interactionJSON encodes an interaction as the gateway sends it, with the
// message's and a modal submission's components.
func interactionJSON(i *discordgo.Interaction, msg json.RawMessage) json.RawMessage {
	b, err := json.Marshal(i)
	if err != nil {
		panic("discordtest: encoding interaction: " + err.Error())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	if msg != nil {
		m["message"] = msg
	} else {
		delete(m, "message")
	}
	var modal *discordgo.ModalSubmitInteractionData
	switch d := i.Data.(type) {
	case discordgo.ModalSubmitInteractionData:
		modal = &d
	case *discordgo.ModalSubmitInteractionData:
		modal = d
	}
	if modal != nil {
		comps := modal.Components
		if comps == nil {
			comps = []discordgo.MessageComponent{}
		}
		m["data"], err = json.Marshal(struct {
			CustomID   string                       `json:"custom_id"`
			Components []discordgo.MessageComponent `json:"components"`
		}{modal.CustomID, comps})
		if err != nil {
			panic("discordtest: encoding modal data: " + err.Error())
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}

// componentsFromJSON decodes raw components into discordgo's types.
func componentsFromJSON(raws []json.RawMessage) ([]discordgo.MessageComponent, error) {
	out := make([]discordgo.MessageComponent, 0, len(raws))
	for _, r := range raws {
		c, err := discordgo.MessageComponentFromJSON(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
