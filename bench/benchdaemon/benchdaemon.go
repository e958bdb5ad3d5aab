// Package benchdaemon starts the real agentqueued binary for the
// benchmarks that measure it from outside (bench/daemonbench,
// bench/retentionbench, bench/fleetbench): a configuration written to a
// file, the daemon on a free port, its address read from its log, a
// graceful stop, the process's CPU time and memory, and the printing of
// their results.
package benchdaemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// CPU returns the daemon's CPU time so far (user and system), from
// /proc/PID/stat; 0 when it cannot be read.
func (d *Daemon) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.Pid()))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	// After ")": state(0) ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime(11) stime(12).
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+stime) * time.Second / ticks
}

// RSS returns the daemon's resident set size in bytes (VmRSS of
// /proc/PID/status); 0 when it cannot be read.
func (d *Daemon) RSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Pid()))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// UntilHealthy asks the daemon's /healthz until it answers 200 and
// returns when it did. The polling measures; nothing is synchronised by
// it.
func (d *Daemon) UntilHealthy() (time.Time, error) {
	url := "http://" + d.Addr + "/healthz"
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), nil
			}
		}
		select {
		case <-d.Exited:
			return time.Time{}, fmt.Errorf("the daemon exited before it was healthy: %v", d.Err)
		case <-time.After(time.Millisecond):
		}
	}
}

// Report prints one measure, its name padded to width, with the
// machine's load average.
func Report(width int, what, result string) {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 3 {
		f = f[:3]
	}
	fmt.Printf("%-*s %s (load %s)\n", width, what+":", result, strings.Join(f, " "))
}

// Percentile returns the q-quantile (0 to 1) of s, which is not changed.
func Percentile(s []time.Duration, q float64) time.Duration {
	sorted := slices.Sorted(slices.Values(s))
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// Millis is d in milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Build returns bin, or when it is empty builds ./cmd/agentqueued (from
// the module's root, the working directory) into dir and returns that
// binary's path.
func Build(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "agentqueued")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentqueued")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the binary: %w", err)
	}
	return bin, nil
}
