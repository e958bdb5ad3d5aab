#!/bin/sh
# An example command agent for agentqueued. It runs in its own checkout of the
# project, on the task's branch, with the prompt on stdin and these variables:
#   AQ_TASK_ID, AQ_RUN_TOKEN, AQ_SOCKET  (its task and how to report on it)
#   AQ_PROMPT_FILE                      (the prompt, also on stdin)
#   DEMO_BIN, DEMO_AGENT                (the agentqueued binary and the agent's name, from its env setting)
# It writes one file for its task, commits it, and reports completion.
set -eu
cat > /dev/null # the prompt; a real agent would read it
"$DEMO_BIN" agent progress "working on $AQ_TASK_ID"
echo "$AQ_TASK_ID was done by $DEMO_AGENT" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name="$DEMO_AGENT" -c user.email=agent@localhost -c commit.gpgsign=false \
  commit -q -m "Result of $AQ_TASK_ID"
"$DEMO_BIN" agent complete --summary "wrote result-$AQ_TASK_ID.txt"
