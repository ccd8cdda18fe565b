package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The command form of a site's controls, shared by `pvans demo` and
// pvans-sim: typed on the terminal, or given as flags ("-do 10s restart 1")
// for scripted use.

// Help lists the commands Exec understands.
const Help = `commands (N is a server number, as listed by "servers"):
  servers              list the servers: state, GUID, endpoint, names
  names N              server N's names
  restart N            restart server N: new GUID, same ports (a rebooted IOC)
  kill N               server N goes silent: sockets open, nothing answered (a hung IOC, a pulled cable)
  revive N             a killed server answers again (same GUID)
  stop N               stop server N cleanly: connections closed
  start N              start a stopped or killed server again (new GUID)
  new [NAME...]        start a new server with these names (default: generated)
  add N NAME...        add names to server N (its beacon change count moves; a
                       name server hears of it at the next beacon: 15 s, later 180 s)
  remove N NAME...     remove names from server N
  drop N               close server N's TCP connections, keep it running
  help                 this list`

// ErrUnknownCommand is returned by Exec for a command it does not know.
var ErrUnknownCommand = errors.New("unknown command (try help)")

// Exec runs one command line against the site and returns what happened,
// one line per fact. An empty line does nothing.
func (s *Site) Exec(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", nil
	}
	cmd, args := f[0], f[1:]
	server := func() (int, error) {
		if len(args) == 0 {
			return 0, fmt.Errorf("%s: which server? (%s N)", cmd, cmd)
		}
		i, err := strconv.Atoi(args[0])
		if err != nil || i < 0 || i >= s.Len() {
			return 0, fmt.Errorf("%s: no server %q (0-%d)", cmd, args[0], s.Len()-1)
		}
		return i, nil
	}
	needNames := func() error {
		if len(args) < 2 {
			return fmt.Errorf("%s: no names given (%s N NAME...)", cmd, cmd)
		}
		return nil
	}
	switch cmd {
	case "help", "?":
		return Help, nil
	case "servers", "list", "ls":
		var b strings.Builder
		for _, inf := range s.Servers() {
			fmt.Fprintf(&b, "server %d  %-8s GUID %s  tcp %s  %d names\n", inf.Index, inf.State, inf.GUID, inf.TCP, len(inf.Names))
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	case "names":
		i, err := server()
		if err != nil {
			return "", err
		}
		return strings.Join(s.Server(i).Names, "\n"), nil
	case "restart", "start":
		i, err := server()
		if err != nil {
			return "", err
		}
		old := s.Server(i)
		if err := s.Restart(i); err != nil {
			return "", err
		}
		if old.State == Stopped {
			return fmt.Sprintf("server %d started: GUID %s, tcp %s", i, s.Server(i).GUID, old.TCP), nil
		}
		return fmt.Sprintf("server %d %sed: GUID %s → %s, tcp %s", i, cmd, old.GUID, s.Server(i).GUID, old.TCP), nil
	case "kill":
		i, err := server()
		if err != nil {
			return "", err
		}
		if err := s.Kill(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("server %d killed: silent, sockets open (pvans notices by its watch connection's echo timeout)", i), nil
	case "revive":
		i, err := server()
		if err != nil {
			return "", err
		}
		if err := s.Revive(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("server %d answers again (GUID %s)", i, s.Server(i).GUID), nil
	case "stop":
		i, err := server()
		if err != nil {
			return "", err
		}
		if err := s.Stop(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("server %d stopped: connections closed", i), nil
	case "drop":
		i, err := server()
		if err != nil {
			return "", err
		}
		if err := s.DropConnections(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("server %d closed its TCP connections", i), nil
	case "new":
		names := args
		if len(names) == 0 {
			names = GenerateNames(s.Len(), s.opts.NamesPerServer, s.opts.NameLen)
		}
		i, err := s.AddServer(names)
		if err != nil {
			return "", err
		}
		inf := s.Server(i)
		return fmt.Sprintf("server %d started: GUID %s, tcp %s, %d names (%s …)", i, inf.GUID, inf.TCP, len(inf.Names), inf.Names[0]), nil
	case "add", "remove", "rm":
		i, err := server()
		if err != nil {
			return "", err
		}
		if err := needNames(); err != nil {
			return "", err
		}
		if cmd == "add" {
			err = s.AddNames(i, args[1:]...)
		} else {
			err = s.RemoveNames(i, args[1:]...)
		}
		if err != nil {
			return "", err
		}
		inf := s.Server(i)
		return fmt.Sprintf("server %d now has %d names (change count %d)", i, len(inf.Names), inf.ChangeCount), nil
	}
	return "", fmt.Errorf("%q: %w", cmd, ErrUnknownCommand)
}

// Timed is a command to run at a time after the site is ready: the
// scripted form of the terminal commands.
type Timed struct {
	After   time.Duration
	Command string
}

// ParseTimed parses "DURATION COMMAND", e.g. "10s restart 1".
func ParseTimed(s string) (Timed, error) {
	at, cmd, ok := strings.Cut(strings.TrimSpace(s), " ")
	d, err := time.ParseDuration(at)
	if !ok || err != nil || d < 0 || strings.TrimSpace(cmd) == "" {
		return Timed{}, fmt.Errorf("%q: want \"DURATION COMMAND\", e.g. \"10s restart 1\"", s)
	}
	return Timed{After: d, Command: strings.TrimSpace(cmd)}, nil
}
