package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// CheckResult is what Check learned from Discord.
type CheckResult struct {
	// BotName is the token's bot user.
	BotName string
	// ChannelName is the control channel's name.
	ChannelName string
}

// Check asks Discord's REST API, with the configuration's token, who the
// bot is and for the control channel, and checks that the channel is in
// the configured guild. It opens no gateway connection. An error names
// the key to fix (discord.token, discord.guild_id,
// discord.control_channel_id) and what Discord answered.
func Check(ctx context.Context, cfg Config) (CheckResult, error) {
	base := strings.TrimSuffix(cfg.APIBaseURL, "/")
	if base == "" {
		base = DefaultAPIBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return CheckResult{}, models.Errorf(models.CodeInvalid, "discord.api_base_url: %q is not an http(s) URL", base)
	}
	timeout := cfg.HTTPTimeout
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	s, err := discordgo.New("Bot " + cfg.Token)
	if err != nil {
		return CheckResult{}, fmt.Errorf("discord: %w", err)
	}
	s.Client = &http.Client{Transport: rewrite{base: base}, Timeout: timeout}
	s.MaxRestRetries = 0
	var res CheckResult
	me, err := s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return res, fmt.Errorf("discord.token: Discord refused it (%s)", restMessage(err))
	}
	res.BotName = me.Username
	ch, err := s.Channel(cfg.ControlChannelID, discordgo.WithContext(ctx))
	if err != nil {
		return res, fmt.Errorf("discord.control_channel_id: channel %s cannot be read by the bot (%s)", cfg.ControlChannelID, restMessage(err))
	}
	res.ChannelName = ch.Name
	if ch.GuildID != cfg.GuildID {
		return res, fmt.Errorf("discord.guild_id: the control channel %s is in guild %s, not %s", cfg.ControlChannelID, ch.GuildID, cfg.GuildID)
	}
	return res, nil
}

// restMessage is Discord's answer to a failed request, without the token.
func restMessage(err error) string {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		code := strconv.Itoa(re.Response.StatusCode)
		switch {
		case re.Message == nil || re.Message.Message == "":
			return re.Response.Status
		case strings.HasPrefix(re.Message.Message, code):
			return re.Message.Message
		}
		return code + " " + re.Message.Message
	}
	return err.Error()
}
