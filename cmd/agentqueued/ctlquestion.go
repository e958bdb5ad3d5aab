package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's question commands: list and answer, and the
// printer of questions.

func (c *ctl) questionList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("question list"), args); err != nil {
		return err
	}
	qs, err := c.client.OpenQuestions(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.QuestionList{Questions: qs}, func(w io.Writer) { printQuestions(w, qs) })
}

func (c *ctl) questionAnswer(ctx context.Context, args []string) error {
	fs := c.flagSet("question answer")
	by := fs.String("by", "ctl", "who answers")
	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("question answer: want ID ANSWER..., got %d argument(s)", len(pos))
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil {
		return usagef("question answer: %q is not a question id", pos[0])
	}
	if err := c.connect(); err != nil {
		return err
	}
	q, err := c.client.AnswerQuestion(ctx, id, strings.Join(pos[1:], " "), *by)
	if err != nil {
		return err
	}
	return c.emit(q, func(w io.Writer) { fmt.Fprintf(w, "question %d of task %s answered\n", q.ID, q.TaskID) })
}

func printQuestions(w io.Writer, qs []models.Question) {
	tw := table(w)
	row(tw, "ID", "TASK", "ASKED", "QUESTION")
	for _, q := range qs {
		row(tw, strconv.FormatInt(q.ID, 10), q.TaskID, when(q.AskedAt), q.Text)
	}
	tw.Flush()
}
