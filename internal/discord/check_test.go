package discord

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
)

// TestCheck: Check asks Discord for the bot and the control channel and
// names the key to fix.
func TestCheck(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(discordtest.Options{Token: "tok", Channels: []string{discordtest.DefaultChannelID}})
	t.Cleanup(fake.Close)
	tests := []struct {
		name                  string
		token, guild, channel string
		want                  string
	}{
		{"a good configuration", "tok", discordtest.DefaultGuildID, discordtest.DefaultChannelID, ""},
		{"a wrong token", "nope", discordtest.DefaultGuildID, discordtest.DefaultChannelID, "discord.token: Discord refused it (401"},
		{"an unknown channel", "tok", discordtest.DefaultGuildID, "399999999999999999",
			"discord.control_channel_id: channel 399999999999999999 cannot be read by the bot (404"},
		{"another guild", "tok", "299999999999999999", discordtest.DefaultChannelID,
			"discord.guild_id: the control channel " + discordtest.DefaultChannelID + " is in guild " + discordtest.DefaultGuildID + ", not 299999999999999999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Check(context.Background(), Config{Token: tt.token, GuildID: tt.guild, ControlChannelID: tt.channel,
				APIBaseURL: fake.URL()})
			if tt.want == "" {
				if err != nil || res.BotName != discordtest.DefaultBotUsername || res.ChannelName != "general" {
					t.Fatalf("Check = %+v, %v", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v; want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.token) && tt.token != "tok" {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}
