package orchestrator

import "os/exec"

var execCommand = exec.Command
