//go:build linux

package testutil

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Network namespaces made by tests. Traffic a test sends inside them
// never reaches the host's interfaces.

// RequireNetns skips the test unless it can make namespaces: root and
// the ip command. who names the tests in the skip message.
func RequireNetns(t testing.TB, who string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(who + " need root (ip netns add); skipping")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip(who + " need the ip command (apt-get install iproute2); skipping")
	}
}

// Run runs a command and fails the test, with its output, if it fails.
func Run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// Netns is one namespace made by the test.
type Netns struct{ Name string }

// NewNetns creates the namespace name with lo up and loopback multicast:
// multicast on lo and a route for 224.0.0.0/4 there, since pvans and PVXS
// forward unicast searches to local listeners over 224.0.0.128 on lo. It
// is deleted (with its veths) when the test ends.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	n := &Netns{Name: name}
	Run(t, "ip", "netns", "add", n.Name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
		}
	})
	n.IP(t, "link set lo up")
	n.IP(t, "link set lo multicast on")
	n.IP(t, "route add 224.0.0.0/4 dev lo")
	return n
}

// IP runs `ip -n NAME args` (args split on white space).
func (n *Netns) IP(t testing.TB, args string) {
	t.Helper()
	Run(t, "ip", append([]string{"-n", n.Name}, strings.Fields(args)...)...)
}

// Command is name run inside the namespace by `ip netns exec`, which
// execs, so the process's pid is the program's own.
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Do runs fn on a fresh OS thread switched into the namespace. The thread
// stays locked, so it dies with its goroutine instead of returning to the
// scheduler in the wrong namespace. Sockets fn creates live in the
// namespace and may be used from any goroutine afterwards.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+n.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Veth links a and b by a veth pair, an in a and bn in b, gives each end
// its addresses (`ip addr add` arguments before "dev", such as
// "10.0.0.1/24" or "10.0.0.1/24 brd +") and brings both ends up.
func Veth(t testing.TB, a *Netns, an string, aAddrs []string, b *Netns, bn string, bAddrs []string) {
	t.Helper()
	Run(t, "ip", "link", "add", an, "netns", a.Name, "type", "veth", "peer", "name", bn, "netns", b.Name)
	for _, x := range aAddrs {
		a.IP(t, "addr add "+x+" dev "+an)
	}
	for _, x := range bAddrs {
		b.IP(t, "addr add "+x+" dev "+bn)
	}
	a.IP(t, "link set "+an+" up")
	b.IP(t, "link set "+bn+" up")
}

// CleanStaleNetns deletes namespaces left by earlier runs that crashed
// before their cleanup. own matches the names a package gives its
// namespaces, with the creating process's pid as its first submatch; a
// namespace whose creator is gone is deleted, after its processes (the
// crashed run's orphans) are killed.
func CleanStaleNetns(own *regexp.Regexp) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := own.FindStringSubmatch(f[0])
		if len(m) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue // a live run owns it
		}
		if pids, err := exec.Command("ip", "netns", "pids", f[0]).Output(); err == nil {
			for _, p := range strings.Fields(string(pids)) {
				if n, err := strconv.Atoi(p); err == nil {
					_ = unix.Kill(n, unix.SIGKILL)
				}
			}
		}
		_ = exec.Command("ip", "netns", "del", f[0]).Run()
	}
}
