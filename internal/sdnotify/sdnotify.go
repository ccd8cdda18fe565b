// Package sdnotify speaks systemd's notify protocol (sd_notify(3)) without
// libsystemd: READY=1, STOPPING=1, STATUS= and WATCHDOG=1 datagrams to the
// unix socket named by $NOTIFY_SOCKET. Without that variable every call is
// a no-op, so the daemon runs the same under systemd, in a container or in
// a terminal.
package sdnotify

import (
	"net"
	"os"
	"strconv"
	"time"
)

// Notifier sends state strings to systemd.
type Notifier struct {
	addr string
}

// FromEnv returns a notifier for $NOTIFY_SOCKET (nil-safe methods when unset).
func FromEnv() *Notifier {
	a := os.Getenv("NOTIFY_SOCKET")
	if a == "" {
		return &Notifier{}
	}
	return &Notifier{addr: a}
}

// Enabled reports whether a notify socket is configured.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != "" }

// Notify sends one state string such as "READY=1".
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	name := n.addr
	if name[0] == '@' { // abstract namespace
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// Ready tells systemd start-up is complete (Type=notify).
func (n *Notifier) Ready(status string) error {
	return n.Notify("READY=1\nSTATUS=" + status + "\nMAINPID=" + strconv.Itoa(os.Getpid()))
}

// Stopping tells systemd shutdown has begun.
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Reloading tells systemd a configuration reload is in progress.
func (n *Notifier) Reloading() error { return n.Notify("RELOADING=1") }

// WatchdogInterval returns half of $WATCHDOG_USEC (the keep-alive period
// systemd recommends), or 0 when no watchdog is configured for this PID.
func WatchdogInterval() time.Duration {
	us, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || us <= 0 {
		return 0
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(us) * time.Microsecond / 2
}

// Watchdog sends one WATCHDOG=1 keep-alive.
func (n *Notifier) Watchdog() error { return n.Notify("WATCHDOG=1") }
