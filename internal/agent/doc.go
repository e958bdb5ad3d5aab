// Package agent runs agent subprocesses: one adapter per agent type builds
// the command line and reads the output stream, and Process supervises the
// run.
//
// Every run gets its own process group, so stopping it ends the agent and
// everything it started (TERM to the group, a grace period, then KILL). Its
// environment is scrubbed: only a short allow list of the daemon's own
// variables passes through (PATH, HOME, USER, LOGNAME, SHELL, TERM, TZ,
// TMPDIR, LANG and LC_*), then the agent's configured env, then the run's
// AQ_* variables (socket, task id, run token, prompt file). Nothing else of
// the daemon's environment — its Discord, GitHub or API tokens — reaches an
// agent. The prompt is written to the process's stdin and to a file named by
// AQ_PROMPT_FILE. Everything the process prints goes to a log file per task
// attempt; the tail of its stderr is kept for the failure message.
package agent
