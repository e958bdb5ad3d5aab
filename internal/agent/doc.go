// Package agent runs agent subprocesses: one adapter per agent type builds
// the command line and reads the output stream, and Process supervises the
// run.
//
// Every run gets its own process group, so stopping it ends the agent and
// everything it started (TERM to the group, a grace period, then KILL).
// Whether anything of a group is left is one kill(-pgid, 0) (ESRCH: none);
// only when the kernel still knows a member is /proc read, to tell a zombie
// from a live process. Its
// environment is scrubbed: only a short allow list of the daemon's own
// variables passes through (PATH, HOME, USER, LOGNAME, SHELL, TERM, TZ,
// TMPDIR, LANG and LC_*), then the variables the agent's pass_env names
// (PassEnv: a provider's API key the daemon was started with), then the
// agent's configured env, then the run's AQ_* variables the orchestrator
// gives (AQ_SOCKET, AQ_TASK_ID, AQ_RUN_TOKEN, AQ_PROJECT_ID, AQ_ATTEMPT,
// AQ_RUN_KIND, AQ_PROMPT_FILE and AQ_BIN, and for a task of a workflow
// run AQ_RUN_ID, AQ_WORKFLOW, AQ_STEP, AQ_PARALLEL_INDEX,
// AQ_PARALLEL_COUNT and AQ_ITEM, those that apply; docs/agents.md).
// Nothing else of the daemon's environment — its
// Discord, GitHub or API tokens — reaches an agent. The prompt is written to the process's stdin and to a file named by
// AQ_PROMPT_FILE. Everything the process prints goes to a log file per task
// attempt; the tail of its stderr is kept for the failure message.
//
// A process may be started held (Spec.Hold): it exists in its own group,
// with the pid its program will have, but runs only a gate (/bin/sh
// reading one line from a pipe that only its starter can write) until
// Release; the gate then executes the program in its place. If the
// starter dies first, or stops it, the gate exits with status 111 and the
// program never runs. The command is looked up before the process starts,
// as exec does, so a missing or non-executable command still fails Start.
// The gate keeps the environment's variables exactly (not their order).
// A file the kernel refuses to execute after release is the shell's to
// judge: a missing interpreter ends the run with status 127 and the
// shell's message, and a text file without a #! line is run as a shell
// script, where exec alone would have failed to start it. The
// daemon starts every agent held and releases it once its pid is
// recorded, so that no agent runs unknown to the database; EndLeftover
// ends what a run left behind after a restart, the whole process group,
// when any of it is still a run of the task and its caller's fence (the
// daemon's lease) confirms immediately before the signal.
//
// A runner starts its agents detached (StartDetached), so that they
// outlive it: under a shim, the runner's own binary in its shim mode
// (RunShim), which leads a session and process group of its own, runs the
// program in that group, waits for it and writes its exit status to a
// file (a new file renamed into place). The program's standard input is a
// file, and its output goes to two append-only files that the starter
// reads as they grow, by offset, handing lines on as it would read pipes.
// A later starter takes the run up (Attach) from a checkpoint — the
// offsets read and the log's size then — knowing the shim by its pid and
// its start time (StartTime, ShimAlive), which tells a reused pid: the
// lines before the checkpoint go only to Replay, to rebuild a parser's
// state, and the log is cut back to the checkpoint, so nothing is handed
// on or logged twice.
//
// Four adapters run the agent CLIs (see shared/AGENT-CLIS.md for their
// flags and formats): Claude (claude -p --output-format stream-json), Codex
// (codex exec --json), Cursor (cursor-agent -p --output-format stream-json)
// and Aider (aider --message-file). The prompt goes to standard input (the
// prompt file for aider), never on the command line. MCP servers reach
// Claude as an mcp.json in the run's private state directory and Codex as
// -c overrides whose env values travel in the agent's environment (listed
// in env_vars), so no token is ever on argv; Cursor gets none and reports
// through the `agentqueued agent` commands, and Aider gets none;
// PassesMCPServers says which runs get them (their prompts alone name the
// servers and offer agentqueued's MCP tools). Claude is
// allowed the daemon's server's tools (mcp__agentqueued in --allowedTools)
// and Codex has them approved, with a tool timeout that outlasts a
// blocking ask. ShellFallback says whether a run can report through
// `<AQ_BIN> agent …` in a shell (not codex under a sandbox, not plan mode,
// not aider); the permission modes each CLI accepts, and the translations
// of other CLIs' names, are models.PermissionModes and
// models.PermissionModeFor. Their parsers turn each output line into
// events — session id, this run's cumulative usage, rate limits with their
// reset time, assistant text, the final result — tolerate anything they do
// not know, and decide a stream that ended without a
// result as a failure; aider, which has no terminal event, is judged by its
// exit code and the edits and errors it printed. A Claude result that lists
// permission_denials is a failure naming the denied tools and the profile
// settings that allow them; Claude's init line gives the CLI's version and
// the MCP servers not yet connected (EventCLI), and Codex's version is read
// with --version (VersionProber). fakeagent is a stand-in
// executable for all four, driven by directives in the prompt, for tests.
package agent
