package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// A hostNet is a network of a test's own on this machine: a Linux bridge
// in the root network namespace holding 10.A.B.1/24, and for each host a
// network namespace joined to the bridge by a veth pair, holding
// 10.A.B.(i+2)/24. A process started with hostNet.command runs on host i:
// the daemon, in the root namespace, sees it come from that address.
//
// The subnet is reserved by the bridge's name (aqb-AABB): creating a link
// is atomic, so parallel tests and parallel test processes never share
// one, and a subnet any route of the machine already covers is skipped.
type hostNet struct {
	t      *testing.T
	prefix string // "10.A.B"
	tag    string // AABB, hexadecimal
	bridge string

	mu    sync.Mutex
	hosts []string // the namespaces made so far, by host
	links []string // the links made so far, in the root namespace
}

// hostNetAlias marks the links a test process makes: a later process
// deletes those of a process no longer alive.
const hostNetAlias = "agentqueued test pid "

// hostNetSeq tells apart the networks of one test process.
var hostNetSeq atomic.Uint32

// hostNetSweep deletes, once per test process, what test processes that
// died without their clean-up left.
var hostNetSweep sync.Once

// ipCmd runs ip with args and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// newHostNet makes the bridge of a network of the test's own and the
// namespace of its first host. When the machine does not allow it (not
// root, no ip, no network namespaces) it returns why, having left
// nothing behind. Everything it makes is deleted in t.Cleanup, the
// processes left in its namespaces killed first.
func newHostNet(t *testing.T) (*hostNet, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, errors.New("network namespaces need root (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("network namespaces need ip (iproute2): %v", err)
	}
	hostNetSweep.Do(sweepHostNets)
	routes, err := ipRoutes()
	if err != nil {
		return nil, err
	}
	n := &hostNet{t: t}
	t.Cleanup(n.remove)
	// A start that differs between processes and between the networks of
	// one; the bridge's name settles any collision.
	start := (os.Getpid()*7919 + int(hostNetSeq.Add(1))*104729) % (1 << 16)
	for try := range 256 {
		v := (start + try*257) % (1 << 16)
		a, b := v>>8, v&0xff
		subnet := &net.IPNet{IP: net.IPv4(10, byte(a), byte(b), 0).To4(), Mask: net.CIDRMask(24, 32)}
		if overlaps(subnet, routes) {
			continue
		}
		bridge := fmt.Sprintf("aqb-%02x%02x", a, b)
		out, err := ipCmd("link", "add", bridge, "type", "bridge", "forward_delay", "0")
		if err != nil {
			if strings.Contains(out, "File exists") {
				continue
			}
			return nil, err
		}
		n.prefix, n.tag, n.bridge = fmt.Sprintf("10.%d.%d", a, b), fmt.Sprintf("%02x%02x", a, b), bridge
		n.links = append(n.links, bridge)
		break
	}
	if n.bridge == "" {
		return nil, errors.New("no free subnet 10.A.B.0/24: the machine's routes cover them")
	}
	for _, args := range [][]string{
		{"link", "set", "dev", n.bridge, "alias", hostNetAlias + strconv.Itoa(os.Getpid())},
		{"addr", "add", n.prefix + ".1/24", "dev", n.bridge},
		{"link", "set", "dev", n.bridge, "up"},
	} {
		if _, err := ipCmd(args...); err != nil {
			return nil, err
		}
	}
	if _, err := n.host(0); err != nil {
		return nil, err
	}
	return n, nil
}

// ipRoutes are the destinations of the machine's IPv4 routes, in every
// table, but the default.
func ipRoutes() ([]*net.IPNet, error) {
	out, err := ipCmd("-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return nil, fmt.Errorf("ip -j route: %v", err)
	}
	var nets []*net.IPNet
	for _, r := range routes {
		dst := r.Dst
		if dst == "default" || dst == "" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, n, err := net.ParseCIDR(dst); err == nil {
			nets = append(nets, n)
		}
	}
	return nets, nil
}

// overlaps reports whether subnet shares an address with any of nets.
func overlaps(subnet *net.IPNet, nets []*net.IPNet) bool {
	for _, n := range nets {
		if n.Contains(subnet.IP) || subnet.Contains(n.IP) {
			return true
		}
	}
	return false
}

// gateway is the bridge's address, in the root namespace: where the
// hosts reach this machine's processes.
func (n *hostNet) gateway() string { return n.prefix + ".1" }

// addr is host i's address.
func (n *hostNet) addr(i int) string { return fmt.Sprintf("%s.%d", n.prefix, i+2) }

// host returns the namespace of host i, made (with the hosts before it)
// if it is not yet: lo up, a veth pair whose one end is on the bridge
// and the other, in the namespace, holds the host's address.
func (n *hostNet) host(i int) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i+2 > 254 {
		return "", fmt.Errorf("host %d: a /24 holds 253 hosts", i)
	}
	for len(n.hosts) <= i {
		j := len(n.hosts)
		ns := fmt.Sprintf("aqt-%d-%s-%d", os.Getpid(), n.tag, j)
		if _, err := ipCmd("netns", "add", ns); err != nil {
			return "", err
		}
		n.hosts = append(n.hosts, ns)
		outer, inner := fmt.Sprintf("aqv-%s-%d", n.tag, j), fmt.Sprintf("aqh-%s-%d", n.tag, j)
		if _, err := ipCmd("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns); err != nil {
			return "", err
		}
		n.links = append(n.links, outer)
		for _, args := range [][]string{
			{"link", "set", "dev", outer, "alias", hostNetAlias + strconv.Itoa(os.Getpid())},
			{"link", "set", "dev", outer, "master", n.bridge},
			{"link", "set", "dev", outer, "up"},
			{"-n", ns, "link", "set", "dev", "lo", "up"},
			{"-n", ns, "addr", "add", n.addr(j) + "/24", "dev", inner},
			{"-n", ns, "link", "set", "dev", inner, "up"},
		} {
			if _, err := ipCmd(args...); err != nil {
				return "", err
			}
		}
	}
	return n.hosts[i], nil
}

// command is argv run on host i: ip netns exec, which execs argv (the
// process keeps its pid).
func (n *hostNet) command(i int, argv ...string) []string {
	n.t.Helper()
	ns, err := n.host(i)
	if err != nil {
		n.t.Fatal(err)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		n.t.Fatal(err)
	}
	return append([]string{ip, "netns", "exec", ns}, argv...)
}

// remove kills what still runs in the namespaces and deletes them, the
// veth pairs and the bridge.
func (n *hostNet) remove() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.hosts) - 1; i >= 0; i-- {
		if left := killNamespace(n.hosts[i]); len(left) > 0 {
			n.t.Logf("killed processes left in namespace %s: %v", n.hosts[i], left)
		}
		if _, err := ipCmd("netns", "del", n.hosts[i]); err != nil {
			n.t.Errorf("delete the test's namespace: %v", err)
		}
	}
	for i := len(n.links) - 1; i >= 0; i-- {
		// A veth pair goes with its namespace.
		if out, err := ipCmd("link", "del", "dev", n.links[i]); err != nil && !strings.Contains(out, "Cannot find device") {
			n.t.Errorf("delete the test's link: %v", err)
		}
	}
}

// killNamespace kills the processes of namespace ns and returns their pids.
func killNamespace(ns string) []int {
	out, err := ipCmd("netns", "pids", ns)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may have ended
			pids = append(pids, pid)
		}
	}
	return pids
}

// sweepHostNets deletes the namespaces and links of test processes no
// longer alive (killed before their clean-up ran).
func sweepHostNets() {
	dead := func(pid string) bool {
		p, err := strconv.Atoi(pid)
		if err != nil || p <= 0 {
			return false
		}
		err = syscall.Kill(p, 0)
		return errors.Is(err, syscall.ESRCH)
	}
	if out, err := ipCmd("-j", "netns", "list"); err == nil {
		var list []struct {
			Name string `json:"name"`
		}
		if json.Unmarshal([]byte(out), &list) == nil {
			for _, ns := range list {
				if rest, ok := strings.CutPrefix(ns.Name, "aqt-"); ok {
					if pid, _, ok := strings.Cut(rest, "-"); ok && dead(pid) {
						killNamespace(ns.Name)
						ipCmd("netns", "del", ns.Name) //nolint:errcheck // best effort
					}
				}
			}
		}
	}
	if out, err := ipCmd("-j", "link", "show"); err == nil {
		var links []struct {
			Name  string `json:"ifname"`
			Alias string `json:"ifalias"`
		}
		if json.Unmarshal([]byte(out), &links) == nil {
			for _, l := range links {
				if pid, ok := strings.CutPrefix(l.Alias, hostNetAlias); ok && dead(pid) {
					ipCmd("link", "del", "dev", l.Name) //nolint:errcheck // best effort
				}
			}
		}
	}
}

// A hostNet gives each host its own address on the test's bridge, and its
// clean-up kills what still runs on its hosts and deletes the namespaces,
// the veth pairs and the bridge.
func TestHostNetLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	var (
		n     *hostNet
		cat   *exec.Cmd
		ended = make(chan error, 1)
	)
	t.Run("hosts", func(t *testing.T) {
		var err error
		if n, err = newHostNet(t); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
		for i := range 2 {
			ns, err := n.host(i)
			if err != nil {
				t.Fatal(err)
			}
			out, err := ipCmd("-n", ns, "-4", "-o", "addr", "show")
			if err != nil || !strings.Contains(out, " "+n.addr(i)+"/24 ") || !strings.Contains(out, " 127.0.0.1/8 ") {
				t.Errorf("host %d's addresses: %v\n%s", i, err, out)
			}
		}
		out, err := ipCmd("-4", "-o", "addr", "show", "dev", n.bridge)
		if err != nil || !strings.Contains(out, " "+n.gateway()+"/24 ") {
			t.Errorf("the bridge's addresses: %v\n%s", err, out)
		}
		// A process left running on host 1: the clean-up ends it.
		argv := n.command(1, "cat")
		cat = exec.Command(argv[0], argv[1:]...)
		if _, err := cat.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cat.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { ended <- cat.Wait() }()
	})
	if n == nil {
		return
	}
	watch := progresstest.New(t, "the end of the hosts")
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("the process left on a host ended with %v, want killed", err)
		}
	case <-watch.Done():
		cat.Process.Kill()
		t.Errorf("the process left on a host outlived its namespace: %v", watch.Err())
	}
	out, err := ipCmd("netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range n.hosts {
		if strings.Contains(out, ns) {
			t.Errorf("namespace %s is left:\n%s", ns, out)
		}
	}
	for _, l := range n.links {
		if out, err := ipCmd("link", "show", "dev", l); err == nil {
			t.Errorf("link %s is left:\n%s", l, out)
		}
	}
}
