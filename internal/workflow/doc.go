// Package workflow reads, checks and expands workflows: reusable DAGs of
// steps for one project that a person or a cron schedule starts as runs,
// each run's tasks being ordinary tasks.
//
// # The document
//
// A workflow is one YAML document (JSON is YAML too):
//
//	name: nightly-deps                 # required; lower-case letters, digits, '-', '_'
//	project: web                       # required; the project the tasks belong to
//	description: Keep dependencies fresh
//	schedule: "0 2 * * *"              # optional cron expression (or @daily, …)
//	timezone: Europe/Paris             # IANA zone of the schedule; default UTC
//	schedule_enabled: true             # default true
//	inputs:                            # optional; values a run is given
//	  - name: channel                  # letters, digits and '_'
//	    description: where to publish
//	    default: stable                # used when the run gives none
//	  - name: version
//	    required: true                 # no default; refused with a schedule
//	steps:
//	  - name: discover
//	    title: "List outdated modules of {{run.workflow}}"
//	    description: |
//	      Report the outdated modules as outputs {"modules": [...]}.
//	    profile: cheap                 # optional profile name
//	    kind: deps                     # optional, for rules and dedupe
//	    priority: 50                   # optional, 0 is the most urgent
//	    max_retries: 2                 # optional, 0-100
//	    test_commands: ["go test ./..."]
//	    verification: AUTO_TEST        # AUTO_TEST, QA_AGENT or HUMAN
//	    requires_approval: false
//	  - name: upgrade
//	    title: "Upgrade {{item}}"
//	    depends_on: [discover]
//	    foreach: discover.outputs.modules   # one task per item of the list
//	    concurrency: 2                      # at most 2 of them at once
//	  - name: shards
//	    title: "Shard {{index}} of {{count}}"
//	    parallel: 4                         # or a count discover reported:
//	                                        # discover.outputs.shard_count
//	                                        # (with depends_on: [discover])
//	  - name: summary
//	    title: Summarise
//	    depends_on:
//	      - step: upgrade
//	        requires_success: false         # runs even when an upgrade fails
//
// A dependency is a step name, or {step, requires_success} (default true:
// only the upstream's success lets the step start).
//
// A step makes one task, or fans out: parallel makes N tasks, N a fixed
// count (1-1000) or a whole number an upstream step reported
// ("<step>.outputs.<field>", 0-1000), and foreach makes one task per item
// of a list an upstream step reported (at most 1000). The step read must be
// upstream of the fanning step (through depends_on, directly or not) and
// make exactly one task. A fan-out over outputs is known only when that
// step has completed: the store expands it then, with Expand.
//
// Titles and descriptions are templates. {{run.id}} and {{run.workflow}}
// are the run's id and the workflow's name; {{item}} and {{item.<field>}}
// a foreach task's item and its fields; {{index}} (from 0) and {{count}} a
// fanned-out task's place; {{<step>.outputs.<field>}} a field of the
// outputs of an upstream step that makes one task; {{inputs.<name>}} one
// of the run's inputs (declared under inputs). Spaces inside the braces
// are allowed. A JSON string fills in unquoted, any other value as compact
// JSON.
//
// # Checks
//
// Parse reports every problem of a document at once, one line each, as
// "FILE:LINE:COL: PATH: MESSAGE":
//
//	nightly.yaml:14:7: steps[2].depends_on[0]: unknown step "tets" (steps: discover, upgrade, summary)
//
// Text follows the daemon's classes (docs/semantics.md, "Limits"): a
// title, kind, schedule, time zone or fan-out reference is one line of
// printable text, a description or test command may hold line breaks and
// tabs, and no field may hold another control character, whether written
// as an escape ("\0", "\e") or not. A document that is not UTF-8, or
// holds an unescaped control character other than tab and line breaks,
// is refused at its line and column.
//
// Validate makes the same checks on a decoded workflow, without positions.
//
// # Inputs
//
// A run is given values for the inputs the workflow declares: by hand
// (ctl workflow run --input name=value, the API's "inputs"), or none for a
// scheduled run. ResolveInputs checks them when the run starts — a value
// for an undeclared input, a required input without a value, a value that
// is not text are each one line naming the input — and fills in the
// defaults (an optional input without one is ""). The store keeps the
// result with the run, and every task of the run, those a fan-out makes
// later included, is rendered with it.
//
// # Expansion
//
// When a run starts, the store makes the tasks InitialPlan returns: those
// of the steps that need no output. When the steps a deferred step
// depends on are done, DueSteps names it and Expand returns its tasks
// (FanOut for the count and items, StepTasks for the tasks, and one task
// standing for the step when its fan-out cannot be read). Order,
// StepByName and Deferred answer the questions about the graph that this
// needs.
//
// # Runs
//
// Every decision about a run is a pure function over plain data the
// store reads inside its transaction: a run's Progress (the steps that
// have their tasks, and their tasks counted by status). StepStates says
// what each step is (waiting, running, done, failed), DueSteps which
// steps get their tasks now, and Settle the run's status: success when
// every step has its tasks and all are COMPLETED; failed when every task
// has finished, no step can still get its tasks, and a task is BLOCKED or
// a step never can; pending while every task is DEFINED or READY;
// running otherwise; a cancelled run stays cancelled. Settlement.Reason
// says why a run failed; RetryOrder and RetryEvent how a retry restarts
// its tasks, upstream first. The functions read maps only through Order or to
// sum them, so the same state decides the same whatever order its maps
// were filled in, and the store settles the runs a transaction touched in
// id order.
//
// These functions, like Expand and InitialPlan, do no I/O, and the
// package imports no store (the store imports it, and Go refuses the
// cycle): the store calls them inside its own transaction, keeping only
// the loading and saving. The engine (Engine) reaches the store through its
// Store interface, which the daemon fills with the store.
package workflow
