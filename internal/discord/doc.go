// Package discord is the daemon's Discord bot: people act through slash
// commands, buttons, forms and messages (inbound), and the daemon tells
// them what happened through notices in each project's channel and one
// thread per task (outbound). The bot holds no state of its own beyond
// what is being delivered: every operation goes through the command layer
// (Service), with the same validation and errors as the API, and every
// notice comes from the store's outbox (Outbox).
//
// # Files
//
//   - bot.go: Config, the Service and Outbox interfaces, the Bot with New,
//     Run and Wake; the gateway connection and the dispatch of events.
//   - inbound_*.go: interactions. inbound_interaction.go answers one
//     (authorisation, the 3-second deadline, deferral, replies);
//     inbound_commands.go declares the slash commands and
//     inbound_handlers.go runs them; inbound_components.go handles
//     buttons, forms, autocomplete and replies in task
//     threads; inbound_edit.go, inbound_hooks.go, inbound_workflows.go and
//     inbound_status.go hold the commands of their area;
//     inbound_propose.go turns a message that mentions the bot into one
//     proposed command, run only once its author confirms it.
//   - outbound_*.go: notices. outbound_delivery.go is the delivery loop:
//     it reads the due outbox messages (waking on Wake or every
//     PollInterval), posts each with an idempotency nonce, marks it
//     delivered, failed (retried with backoff) or given up, keeps one
//     task's notices in order and coalesces a task's progress lines;
//     outbound_notices.go renders each notice kind (models.NoticeKind) into
//     the messages to post; outbound_threads.go opens, reopens and closes
//     task threads.
//   - render.go: text shared by both sides (escaping, cutting, buttons,
//     custom ids, task and project views).
//   - check.go: Check, the check of the configuration that `agentqueued
//     doctor` runs.
//
// # Delivery
//
// A notice is posted at least once and, by the nonce Discord enforces,
// shown once: a crash between the post and its mark posts it again with
// the same nonce. A notice made of several messages records how many went
// out, so a retry continues after them. A delivery that Discord refuses
// for good (bad form, missing access, unknown channel) is given up at once;
// others are retried up to MaxDeliveryAttempts. A rate limit pauses the
// loop for as long as Discord asks. A kind the bot does not render (a
// progress line is coalesced instead; task.waiting_input is told by the
// question's own notice) is marked delivered without a post.
package discord
