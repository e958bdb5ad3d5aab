// Package models holds agentqueued's domain data: the enums and entities of
// the Agent Queue specification (projects, repos, tasks, agents, hooks), the
// dependency-edge facts and audit records built on them, the request shapes
// shared by every surface (API, chat, hooks), and their validation.
//
// # Text
//
// Every text field is of one of two classes, checked by [CheckLine] and
// [CheckText]: a line (printable characters only: no C0 or C1 control,
// DEL, tab, line break or line separator) or text (line feeds and tabs
// allowed, and a carriage return before a line feed). Both refuse invalid
// UTF-8, and their caps count characters (runes), not bytes. The limits
// are the Max* constants; docs/semantics.md ("Limits") lists every field
// with its class and cap. The validation of each type (Task, TaskBatch,
// TaskPatch, Project, ProjectPatch, Agent, Hook, Rule, Feedback,
// TransitionRequest, Completion, …) applies them, naming the field.
// [CleanLine] and [CleanText] make text composed from untrusted sources
// fit a class instead of refusing it.
//
// # Templates and schedules
//
// Validation needs to read two small languages, so their readers live here,
// each in a file of its own rather than beside the hook: {{…}} placeholders
// ([ScanTemplate] reads them and [FillTemplate] fills them in one pass, for
// hooks and workflows alike; template.go) and cron expressions
// ([ParseCron]; cron.go). What a placeholder may name is the concern of
// each kind of template: hooks' in template.go, workflow steps' in
// internal/workflow.
//
// The package performs no I/O and imports no other internal package; every
// other package may import it.
package models
