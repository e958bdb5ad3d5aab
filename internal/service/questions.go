package service

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the service's operations on what waits for a person:
// questions, answered through the orchestrator so that the waiting agent
// gets the answer, and decisions on reviewed work, made by the
// orchestrator, which merges or restarts it.

// OpenQuestions lists the questions waiting for an answer (the store's).
func (s *Service) OpenQuestions(ctx context.Context) ([]models.Question, error) {
	return s.store.OpenQuestions(ctx)
}

// OpenQuestionsPage lists the questions waiting for an answer, oldest
// first, at most limit, after the question afterID (the store's).
func (s *Service) OpenQuestionsPage(ctx context.Context, afterID int64, limit int) ([]models.Question, error) {
	return s.store.OpenQuestionsPage(ctx, afterID, limit)
}

// TaskQuestions lists a task's questions (the store's).
func (s *Service) TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error) {
	return s.store.TaskQuestions(ctx, taskID)
}

// GetQuestion returns one question (the store's).
func (s *Service) GetQuestion(ctx context.Context, id int64) (models.Question, error) {
	return s.store.GetQuestion(ctx, id)
}

// AnswerQuestion answers a question and hands the answer to the waiting
// agent (the orchestrator's).
func (s *Service) AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error) {
	return s.orch.AnswerQuestion(ctx, id, answer, by)
}

// ApproveTask approves a task waiting for a person (the orchestrator's).
func (s *Service) ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error) {
	return s.orch.Approve(ctx, id, by, note)
}

// RejectTask rejects a task waiting for a person, with feedback (the
// orchestrator's).
func (s *Service) RejectTask(ctx context.Context, id, by, feedback string) (models.TransitionResult, error) {
	return s.orch.Reject(ctx, id, by, feedback)
}

// TaskDiff returns the change of a task's branch (the orchestrator's).
func (s *Service) TaskDiff(ctx context.Context, id string) (string, error) {
	return s.orch.TaskDiff(ctx, id)
}
