package discord

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// countingOutbox signals when a number of notices have been marked delivered.
type countingOutbox struct {
	Outbox
	mu     sync.Mutex
	marked int
	want   int
	done   chan struct{}
}

func (c *countingOutbox) MarkOutboxDelivered(ctx context.Context, id int64) error {
	err := c.Outbox.MarkOutboxDelivered(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marked++; c.marked == c.want {
		close(c.done)
	}
	return err
}

func (c *countingOutbox) expect(n int) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marked, c.want, c.done = 0, n, make(chan struct{})
	return c.done
}

// BenchmarkDeliverNotices measures the outbox's delivery of channel notices
// to the fake Discord over 127.0.0.1: read, render, post (with its nonce,
// through discordgo's rate-limit buckets) and mark delivered, one after
// another.
func BenchmarkDeliverNotices(b *testing.B) {
	h := newHarness(b, func(c *Config, o *discordtest.Options) { c.PollInterval = time.Hour; o.Logf = nil })
	h.stop()
	box := &countingOutbox{Outbox: h.st}
	h.bot = h.startWith(h.bot.cfg, box)
	h.project("web")
	id := h.task("web", "Bench")
	const batch = 100
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		for k := range batch {
			if err := h.st.Notify(context.Background(), fmt.Sprintf("bench:%d:%d", n, k),
				models.NewPlanFailedNotice("web", models.PlanFailedNotice{TaskID: id, Error: "benchmark notice"})); err != nil {
				b.Fatal(err)
			}
		}
		done := box.expect(batch)
		b.StartTimer()
		h.bot.Wake()
		select {
		case <-done:
		case <-h.ctx().Done():
			b.Fatal("notices not delivered")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/notice")
}
