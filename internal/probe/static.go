package probe

import (
	"bufio"
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
)

// DefaultServerPort is the PVA TCP port assumed when a name file's endpoint
// has none.
const DefaultServerPort = 5075

// NameFiles serves names of servers that cannot be listed from a
// directory: one file per server, one name per line, blank lines and
// '#' comments ignored. The endpoint is a "# endpoint host:port" line, or
// else the file name ("10.0.0.5:5075", "10.0.0.5_5075.names", …). Hosts
// must be IP literals: the daemon does no name lookups here.
//
// An empty Dir holds no files. The directory is polled every Interval (modification time and size of
// each file; no inotify dependency). A new or changed file is reported with
// Sink.Listed (Info.File set), a removed file with Sink.Lost. The GUID is
// StaticGUID(endpoint).
type NameFiles struct {
	Dir      string
	Interval time.Duration // default 10 s
	Sink     Sink
	Clock    clock.Clock
	Logger   *zap.Logger

	mu     sync.Mutex
	files  map[string]fileState // by path
	timer  clock.Timer
	closed bool
}

type fileState struct {
	mod  time.Time
	size int64
	ep   netip.AddrPort
}

// Start scans once now and then every Interval until Close.
func (f *NameFiles) Start() {
	if f.Interval <= 0 {
		f.Interval = 10 * time.Second
	}
	if f.Clock == nil {
		f.Clock = clock.Real{}
	}
	if f.Logger == nil {
		f.Logger = zap.NewNop()
	}
	f.tick()
}

func (f *NameFiles) tick() {
	f.Scan()
	f.mu.Lock()
	if !f.closed {
		f.timer = f.Clock.AfterFunc(f.Interval, f.tick)
	}
	f.mu.Unlock()
}

// SetDir switches to another directory (empty: none) and scans it now:
// the files of the old one are reported lost, the new one's listed.
func (f *NameFiles) SetDir(dir string) {
	f.mu.Lock()
	f.Dir = dir
	f.mu.Unlock()
	f.Scan()
}

// Close stops polling.
func (f *NameFiles) Close() {
	f.mu.Lock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
}

// Scan reads the directory once and reports what changed. Scans are
// serialized; reports are made while holding the scan lock, in file order.
func (f *NameFiles) Scan() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Logger == nil {
		f.Logger = zap.NewNop()
	}
	if f.files == nil {
		f.files = make(map[string]fileState)
	}
	var ents []os.DirEntry
	var err error
	if f.Dir != "" { // no directory: no static names (files known before are lost)
		ents, err = os.ReadDir(f.Dir)
	}
	if err != nil {
		f.Logger.Warn("static names directory unreadable", zap.String("dir", f.Dir), zap.Error(err))
		return // keep what we have: a transient error must not drop names
	}
	seen := make(map[string]bool, len(ents))
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(f.Dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue
		}
		seen[path] = true
		old, had := f.files[path]
		if had && old.mod.Equal(fi.ModTime()) && old.size == fi.Size() {
			continue
		}
		ep, names, err := ReadNameFile(path)
		if err != nil {
			f.Logger.Warn("static names file skipped", zap.String("file", path), zap.Error(err))
			continue
		}
		if had && old.ep != ep {
			f.Sink.Lost(StaticGUID(old.ep), old.ep, "static names file now names another endpoint")
		}
		f.files[path] = fileState{mod: fi.ModTime(), size: fi.Size(), ep: ep}
		f.Sink.Listed(StaticGUID(ep), ep, names, Info{File: path})
	}
	for path, st := range f.files {
		if !seen[path] {
			delete(f.files, path)
			f.Sink.Lost(StaticGUID(st.ep), st.ep, "static names file removed")
		}
	}
}

// ReadNameFile parses one name file.
func ReadNameFile(path string) (netip.AddrPort, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	var ep netip.AddrPort
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			if f := strings.Fields(rest); len(f) == 2 && f[0] == "endpoint" && !ep.IsValid() {
				if ep, err = ParseEndpoint(f[1]); err != nil {
					return ep, nil, err
				}
			}
			continue
		}
		names = append(names, line)
	}
	if err := sc.Err(); err != nil {
		return ep, nil, err
	}
	if !ep.IsValid() {
		ep, err = endpointFromFileName(filepath.Base(path))
		if err != nil {
			return ep, nil, errors.New("no '# endpoint host:port' line and the file name is not an endpoint")
		}
	}
	return ep, names, nil
}

// ParseEndpoint parses "ip:port", "[ipv6]:port" or a bare IP (port 5075).
func ParseEndpoint(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), DefaultServerPort), nil
}

func endpointFromFileName(name string) (netip.AddrPort, error) {
	try := []string{name}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		try = append(try, name[:i])
	}
	for _, s := range try {
		if ep, err := ParseEndpoint(s); err == nil {
			return ep, nil
		}
		if i := strings.LastIndexByte(s, '_'); i > 0 {
			if ep, err := ParseEndpoint(s[:i] + ":" + s[i+1:]); err == nil {
				return ep, nil
			}
		}
	}
	return netip.AddrPort{}, errors.New("not an endpoint")
}
