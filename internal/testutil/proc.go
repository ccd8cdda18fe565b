package testutil

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// IsolatedEnv is this process's environment with the EPICS address lists
// emptied and automatic ones off, plus extra: a daemon or IOC started by a
// test then talks only to what the test names (loopback or namespaces).
func IsolatedEnv(extra ...string) []string {
	env := append(os.Environ(), "EPICS_PVA_AUTO_ADDR_LIST=NO", "EPICS_PVA_ADDR_LIST=",
		"EPICS_PVAS_AUTO_BEACON_ADDR_LIST=NO", "EPICS_PVA_NAME_SERVERS=")
	return append(env, extra...)
}

// Proc is a process started by a test, with its output captured.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Lines carries stdout lines, for start-up handshakes; lines that find
	// it full are dropped (they are still in Output).
	Lines chan string

	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	err  error // from Cmd.Wait, once done is closed
}

// logTail is how much of a failed test's process output is logged.
const logTail = 8000

// StartProc starts cmd (its Env as the caller set it) and copies its
// stdout and stderr into Output. When the test ends the process is killed
// and, if the test failed, the tail of its output is logged under name.
func StartProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Lines: make(chan string, 1024), done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	copyLines := func(r io.Reader, lines bool) {
		defer wg.Done()
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.mu.Unlock()
			if lines {
				select {
				case p.Lines <- s.Text():
				default:
				}
			}
		}
	}
	go copyLines(stdout, true)
	go copyLines(stderr, false)
	// Wait only after both pipes are drained, as exec.Cmd requires.
	go func() { wg.Wait(); p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			out := p.Output()
			if len(out) > logTail {
				out = "…" + out[len(out)-logTail:]
			}
			t.Logf("%s output (tail):\n%s", p.Name, out)
		}
	})
	return p
}

// Output is everything the process has written so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Done is closed when the process has exited and its output is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Pid is the process ID.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits (up to 10 s) for the process to be gone.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// WaitExit waits up to d for the process to exit and returns its exit
// code; the test fails if it does not exit in time or cannot be waited for.
func (p *Proc) WaitExit(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.ExitCode()
		}
		if p.err != nil {
			t.Fatal(p.err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s", p.Name, d)
		return -1
	}
}
