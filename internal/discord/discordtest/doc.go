// Package discordtest is a fake Discord server for tests that drive the
// real github.com/bwmarrin/discordgo client over 127.0.0.1.
//
// New starts an httptest server that speaks Discord's wire protocols: REST
// under /api/v9 (any /api/vN, and unversioned /api, are accepted) and the
// gateway websocket at /gateway. A bot under test keeps its production code
// path and only changes where requests go:
//
//	fake := discordtest.New(discordtest.Options{Token: "t"})
//	t.Cleanup(fake.Close) // registered first, so it runs after the session is closed
//	s, _ := discordgo.New("Bot t")
//	s.Client = fake.Client() // sends https://discord.com/... to fake.URL()
//	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent
//	_ = s.Open() // GET /api/v9/gateway, then ws://127.0.0.1:PORT/gateway
//	t.Cleanup(func() {
//		s.Lock()
//		s.ShouldReconnectOnError = false // see "discordgo facts" below
//		s.Unlock()
//		s.Close()
//	})
//
// Any transport that rewrites the scheme and host of https://discord.com
// requests to URL() works as well as Client().
//
// # Gateway
//
// A connection gets HELLO (op 10); IDENTIFY (op 2) with the right token
// gets READY and GUILD_CREATE (one guild, its text channels and active
// threads); heartbeats (op 1) are acknowledged (op 11) at once unless
// SkipAcks says otherwise; RESUME (op 6) replays the dispatches the client
// missed (those with a sequence number above the one it sends) and then sends
// RESUMED; resuming an unknown or invalidated session gets INVALID_SESSION
// (op 9, d=false). Protocol errors close the connection with Discord's codes:
// 4001 unknown opcode, 4002 undecodable payload, 4003 payload before
// IDENTIFY, 4004 bad token, 4005 second IDENTIFY, 4007 bad RESUME sequence,
// 4013 invalid intents, 4014 privileged intents (with
// Options.DenyPrivilegedIntents). A client closing with 1000 or 1001
// invalidates its session, as on Discord.
//
// Dispatches: INTERACTION_CREATE, MESSAGE_CREATE/UPDATE/DELETE (for the
// bot's own messages too, which the bot must ignore), THREAD_CREATE/UPDATE,
// CHANNEL_UPDATE, each subject to the identified intents. Without the
// MESSAGE_CONTENT intent, messages of other users arrive with content,
// embeds, attachments and components blanked unless they mention the bot.
// Dispatches made while no client is connected are queued: a RESUME
// replays them, a new IDENTIFY delivers them after READY. Only the most
// recently identified or resumed connection receives dispatches.
//
// DropConnection, SendReconnect and SkipAcks exercise the client's
// reconnect paths.
//
// # REST
//
// Gateway discovery; application commands (bulk overwrite, list, single
// create/get/edit/delete, guild and global) with Discord's validation;
// interaction callbacks with the 3-second deadline (10062), measured on the
// clock Options.Clock (so that a test can stop it, or move it past the
// deadline), the single acknowledgement (40060) and per-type rules;
// @original and follow-up webhooks; channel messages with multipart
// uploads, nonce idempotency (enforce_nonce), components and length limits;
// threads (from a message, whose id the thread takes, or without one);
// channel get/edit. Errors have Discord's JSON shape {"message", "code"}
// and, for 50035 "Invalid Form Body", the nested "errors" object naming
// each field. Every response carries per-route X-RateLimit-* headers that
// never make discordgo wait; RateLimit injects real 429 answers.
//
// Routes other than gateway discovery, interaction callbacks and webhook
// routes (which Discord authenticates by the token in the path) require
// "Authorization: Bot <token>".
//
// # Observing and waiting
//
// Requests, Dispatches, Commands, Messages, Threads, and the Interaction
// handle returned by Interact record what the client did. Changed returns
// a channel closed at the next change of any of them, and WaitFor,
// WaitConnected, WaitMessages and Interaction.Wait build on it, so tests
// wait without sleeping or polling.
//
// # discordgo facts worth knowing
//
// discordgo (v0.29.0) fetches GET /api/v9/gateway (not /gateway/bot),
// appends "/?v=9&encoding=json" to the URL, sends the token with its "Bot "
// prefix in IDENTIFY and RESUME, ignores resume_gateway_url, and on op 9
// sends IDENTIFY whatever d says. Its Session.Close sleeps one second; when
// it gives up on a zombie connection it closes with 1000, which invalidates
// the session, so it identifies anew. A connection lost before discordgo's
// heartbeat goroutine sent its first heartbeat makes that goroutine close the
// next connection with 1000 too (see DropConnection). Close holds the
// session lock through its sleep; a heartbeat goroutine waiting for the lock
// then writes to the closed connection and starts reconnecting, forever once
// the fake is gone, so turn ShouldReconnectOnError off (under the session
// lock) before closing a session for good. It retries a 429 after retry_after for
// as long as 429s come, and a response carrying any X-RateLimit-Global
// header value blocks all its requests until X-RateLimit-Reset-After.
package discordtest
