// Package benchdaemon starts the real agentqueued binary for the
// benchmarks that measure it from outside (bench/daemonbench,
// bench/retentionbench): a configuration written to a file, the daemon on
// a free port, its address read from its log, and a graceful stop.
package benchdaemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/proc"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// Daemon is a running agentqueued process.
type Daemon struct {
	cmd *exec.Cmd
	// Addr is the host:port its API listens on.
	Addr string
	// Listening is when its log said it listens.
	Listening time.Time
	// Exited is closed when the process has ended; Err is then its exit.
	Exited chan struct{}
	Err    error
}

var listening = regexp.MustCompile(`msg="agentqueued listening" addr=(\S+)`)

// Start writes config to dir/agentqueued.yaml and runs bin with it, its
// data directory under dir and its log in dir/daemon.log, until it
// listens (or exits, or stalls: progresstest.Stall).
func Start(bin, dir, config string) (*Daemon, error) {
	cfgPath := filepath.Join(dir, "agentqueued.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	d := &Daemon{Exited: make(chan struct{})}
	d.cmd = proc.Command(context.Background(), bin, "run", "--config", cfgPath, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	logPath := filepath.Join(dir, "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = logf, io.MultiWriter(logf, pw)
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		d.Err = d.cmd.Wait()
		pw.Close()
		logf.Close()
		close(d.Exited)
	}()
	addr := make(chan string, 1)
	go func() {
		buf := make([]byte, 64<<10)
		var seen []byte
		for {
			n, err := pr.Read(buf)
			seen = append(seen, buf[:n]...)
			if m := listening.FindSubmatch(seen); m != nil {
				addr <- string(m[1])
				io.Copy(io.Discard, pr) //nolint:errcheck // the rest is in the log file
				return
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case d.Addr = <-addr:
		d.Listening = time.Now()
		return d, nil
	case <-d.Exited:
		return nil, fmt.Errorf("the daemon exited before listening: %v (log: %s)", d.Err, logPath)
	case <-time.After(progresstest.Stall()):
		d.Stop()
		return nil, errors.New("the daemon did not listen within the stall limit")
	}
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop asks the daemon to stop (SIGTERM) and waits; a daemon that has not
// stopped within the stall limit is killed with its process group.
func (d *Daemon) Stop() {
	select {
	case <-d.Exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
	select {
	case <-d.Exited:
	case <-time.After(progresstest.Stall()):
		proc.KillGroup(d.cmd.Process.Pid) //nolint:errcheck // clean-up
		<-d.Exited
	}
}
