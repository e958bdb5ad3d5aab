package discord

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// postThread posts into the task's thread; a thread deleted in Discord is
// replaced by a new one.
func (b *Bot) postThread(ctx context.Context, channelID string, n notice, nonce string, p part) error {
	thread, err := b.thread(ctx, channelID, n)
	if err != nil {
		return err
	}
	_, err = b.send(ctx, thread, nonce, p)
	if discordCode(err) != codeUnknownChannel {
		return err
	}
	b.log.Warn("task thread gone from discord; opening a new one", "task_id", n.TaskID, "thread_id", thread)
	if err := b.box.ForgetTaskThread(ctx, n.TaskID, thread); err != nil {
		return err
	}
	// The new anchor's nonce differs from the old one's, which Discord may
	// still remember.
	if thread, err = b.threadAnchored(ctx, channelID, n, threadNonce(n.TaskID+"|"+thread)); err != nil {
		return err
	}
	_, err = b.send(ctx, thread, nonce, p)
	return err
}

// thread returns the task's thread, creating it (from an anchor notice in
// the channel) when the task has none yet.
func (b *Bot) thread(ctx context.Context, channelID string, n notice) (string, error) {
	return b.threadAnchored(ctx, channelID, n, threadNonce(n.TaskID))
}

// threadAnchored is thread with the nonce of the anchor to post.
func (b *Bot) threadAnchored(ctx context.Context, channelID string, n notice, anchorNonce string) (string, error) {
	t, ok, err := b.box.TaskThread(ctx, n.TaskID)
	if err != nil {
		return "", err
	}
	if ok {
		return t.ThreadID, nil
	}
	title := n.Title
	if title == "" {
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
			title = d.Task.Title
		}
	}
	// The anchor's nonce is the task's, so a retry after a crash finds the
	// same message (and its thread).
	msg, err := b.postChannel(ctx, channelID, anchorNonce, part{Content: fmt.Sprintf("🧵 `%s` %s", n.TaskID, escape(title))})
	if err != nil {
		return "", err
	}
	n.Title = title
	return b.threadFrom(ctx, n, msg)
}

// threadNonce is the nonce of a task's thread anchor (at most 25 characters).
func threadNonce(taskID string) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(taskID); i++ {
		h = (h ^ uint64(taskID[i])) * 1099511628211
	}
	return "aqt" + strconv.FormatUint(h, 36)
}

// threadFrom starts the task's thread on msg and records it. A thread
// started on the message before (a retry after a crash) has the message's
// id, as Discord gives every thread started from a message.
func (b *Bot) threadFrom(ctx context.Context, n notice, msg *discordgo.Message) (string, error) {
	if t, ok, err := b.box.TaskThread(ctx, n.TaskID); err != nil || ok {
		return t.ThreadID, err
	}
	s := b.sess()
	id := msg.ID
	_, err := s.MessageThreadStartComplex(msg.ChannelID, msg.ID, &discordgo.ThreadStart{
		Name: cut(n.TaskID+" · "+n.Title, 100), AutoArchiveDuration: 10080}, discordgo.WithContext(ctx),
		discordgo.WithRetryOnRatelimit(false))
	if err != nil && discordCode(err) != codeThreadAlreadyExists {
		return "", fmt.Errorf("start thread of task %s: %w", n.TaskID, err)
	}
	t, err := b.box.SaveTaskThread(ctx, models.ChatThread{TaskID: n.TaskID, ChannelID: msg.ChannelID, ThreadID: id})
	if err != nil {
		return "", err
	}
	return t.ThreadID, nil
}

// closeThread archives and locks a deleted task's thread, if it has one.
func (b *Bot) closeThread(ctx context.Context, taskID string) error {
	t, ok, err := b.box.TaskThread(ctx, taskID)
	if err != nil || !ok {
		return err
	}
	yes := true
	_, err = b.sess().ChannelEdit(t.ThreadID, &discordgo.ChannelEdit{Archived: &yes, Locked: &yes}, discordgo.WithContext(ctx),
		discordgo.WithRetryOnRatelimit(false))
	if err != nil && discordCode(err) != codeUnknownChannel {
		return err
	}
	// Task ids may be given again: a new task of the same id opens its own.
	return b.box.ForgetTaskThread(ctx, taskID, t.ThreadID)
}
