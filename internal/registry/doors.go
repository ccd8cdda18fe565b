// The two doors of the trust rule (see the package doc, "Trust"):
// UpsertServer takes UDP hints, Listed takes what a TCP exchange proved.
// Outside a snapshot load they are the only ways a server enters the
// registry, so the rule is enforced here; SetProbeState, the prober's
// report, sits beside them.

package registry

import (
	"net/netip"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

// UpsertServer records a hint: a beacon, discovery reply or search-through
// reply named the server, or a static name file configured it. It is the
// UDP side of the trust rule (see the package doc): it may create a server
// that has no names yet and refresh a known server's LastSeen, change count
// and version, but it never removes a server, moves one to another
// endpoint, touches a name or confirms a server loaded from a snapshot.
//
// A GUID unknown to the registry at an endpoint another server holds is a
// restart claim (or a forgery): nothing is recorded and ErrEndpointHeld is
// returned; the caller verifies the claim over TCP, and Listed applies it.
// A known GUID named at another endpoint is refreshed but stays where it
// is (ErrEndpointHeld too). Servers whose names come from a static name
// file (ListedHow SourceStatic, or in.Discovered SourceStatic) are claims of
// their own and share an endpoint with a real server. It returns whether
// the server is new, or ErrServerLimit.
func (r *Registry) UpsertServer(in ServerInfo) (created bool, err error) {
	now := r.clk.Now()
	if in.Protocol == "" {
		in.Protocol = "tcp"
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()

	w := r.write()
	defer w.abort()
	s := w.server(in.GUID)
	if s == nil && in.Addr.IsValid() && in.Discovered != SourceStatic && len(othersAt(w, in.Addr, in.GUID)) > 0 {
		r.st.hintsRefused.Add(1)
		return false, ErrEndpointHeld
	}
	if s == nil {
		if r.serverCount() >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return false, ErrServerLimit
		}
		r.createLocked(w, in, now)
		r.commit(w)
		return true, nil
	}
	info := s.row.Info
	if in.Addr != info.Addr || in.Protocol != info.Protocol {
		r.st.hintsRefused.Add(1)
		err = ErrEndpointHeld
	} else {
		info.LastSeen = now
		if !in.LastSeen.IsZero() {
			info.LastSeen = in.LastSeen
		}
		info.ChangeCount = in.ChangeCount
		info.Version = in.Version
	}
	if info.Discovered == SourceUnknown {
		info.Discovered = in.Discovered
	}
	r.putRow(w, s, &info)
	r.commit(w)
	return false, err
}

// createLocked inserts a new server without names.
func (r *Registry) createLocked(w *wtxn, in ServerInfo, now time.Time) *server {
	info := in
	if info.FirstSeen.IsZero() {
		info.FirstSeen = now
	}
	if info.LastSeen.IsZero() {
		info.LastSeen = now
	}
	info.Names, info.Held, info.Verified, info.LoadedAt = 0, 0, true, time.Time{}
	r.imu.Lock()
	s := r.newServerLocked(&info)
	r.imu.Unlock()
	r.putRow(w, s, &info)
	return s
}

// othersAt returns the servers other than g registered at ep, except those
// whose names come from a static name file.
func othersAt(w *wtxn, ep netip.AddrPort, g pva.GUID) []*server {
	var out []*server
	for _, row := range w.serversAt(ep) {
		if row.GUID != g && row.Info.ListedHow != SourceStatic {
			out = append(out, row.srv)
		}
	}
	return out
}

// Listed records what a TCP exchange with in.Addr proved: the server
// in.GUID listens there and claims exactly names (a probe's listing). It is
// the only way a server replaces another: every other server registered at
// in.Addr is gone (one endpoint, one listener), so it is removed, and the
// names it held that in.GUID lists pass to in.GUID directly — they keep
// answering and never pass to another claimant in between. Servers whose
// names come from a static name file at the same endpoint stay.
//
// in.TLS is the TLS endpoint the same exchange learned (zero: none): it
// replaces the one known before, so a server that stopped offering TLS is
// no longer named to TLS clients by it.
//
// A GUID registered at another endpoint is not moved (ErrGUIDElsewhere):
// anyone can present any GUID over TCP at an endpoint of their own, so
// only the loss of the old endpoint's watch connection frees the GUID.
func (r *Registry) Listed(in ServerInfo, names []string, how Source) (replaced []pva.GUID, err error) {
	now := r.clk.Now()
	if in.Protocol == "" {
		in.Protocol = "tcp"
	}
	if in.TLS.IsValid() && in.TLS.Addr() != in.Addr.Addr() {
		in.TLS = netip.AddrPort{} // see ServerInfo.TLS
	}
	var added, handed []string
	defer func() { r.notifyHanded(handed) }() // after end's unlock and notify
	w, end := r.begin(&added)
	defer end()
	s := w.server(in.GUID)
	if s != nil && s.row.Info.Addr != in.Addr {
		r.st.guidElsewhere.Add(1)
		return nil, ErrGUIDElsewhere
	}
	olds := othersAt(w, in.Addr, in.GUID)
	for _, o := range olds {
		// A certificate strengthens the trust rule: a TLS-proven server is
		// replaced only by one proving the same identity; anyone else waits
		// for the old one's watch to end (RemoveServer).
		if id := o.row.Info.Identity; id != "" && in.Identity != id {
			r.st.identityRefused.Add(1)
			return nil, ErrIdentity
		}
	}
	if s == nil {
		if r.serverCount()-len(olds) >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return nil, ErrServerLimit
		}
		s = r.createLocked(w, in, now)
	}
	if len(olds) > 0 {
		listed := make(map[string]struct{}, len(names))
		for _, n := range names {
			listed[n] = struct{}{}
		}
		for _, o := range olds {
			r.log.Debug("server restarted: new GUID confirmed over TCP at its endpoint",
				zap.Stringer("old_guid", o.guid), zap.Stringer("guid", s.guid), zap.Stringer("endpoint", in.Addr))
			handed = r.handOverLocked(w, o, s, listed, handed)
			added = append(added, r.removeLocked(w, o)...)
			replaced = append(replaced, o.guid)
			r.st.replaced.Add(1)
		}
	}
	a, err := r.replaceLocked(w, s, names, how, now)
	added = append(added, a...)
	info := s.row.Info
	info.LastSeen = now
	if in.Version != 0 {
		info.Version = in.Version
	}
	if info.Discovered == SourceUnknown {
		info.Discovered = in.Discovered
	}
	if in.Protocol != info.Protocol || in.TLS != info.TLS {
		info.Protocol, info.TLS = in.Protocol, in.TLS
		r.setHolderLocked(s, &info)
	}
	info.Identity = in.Identity
	r.putRow(w, s, &info)
	r.commit(w)
	r.shrinkIndex()
	return replaced, err
}

// handOverLocked makes s the holder of every name o holds that s lists, in
// place: the index entry changes server, no reader sees the name missing
// and no duplicate claimant takes it over. It appends those names to
// handed.
func (r *Registry) handOverLocked(w *wtxn, o, s *server, listed map[string]struct{}, handed []string) []string {
	r.imu.Lock()
	defer r.imu.Unlock()
	keep := make([]string, 0, len(o.names))
	for _, n := range o.names {
		slot, dups, ok := r.idx.holder(n)
		if _, want := listed[n]; !want || !ok || slot != o.slot {
			keep = append(keep, n)
			continue
		}
		if dups > 0 {
			if c := w.conflict(n, s.guid); c != nil {
				// s claimed it as a duplicate: it is no longer one.
				w.delete(tabConflicts, c)
				r.idx.addDups(n, -1)
				r.claims-- // o's claim goes below, s's stays
			} else {
				s.names = append(s.names, n)
			}
			for _, c := range w.conflictsOn(n) {
				if c.Holder == o.guid {
					cc := *c
					cc.Holder = s.guid
					w.insert(tabConflicts, &cc)
				}
			}
		} else {
			s.names = append(s.names, n)
		}
		r.idx.set(n, s.slot)
		r.gen.Add(1)
		o.held--
		s.held++
		handed = append(handed, n)
	}
	o.names = keep
	return handed
}

// maxProbeError is the most of a probe error kept per server: it can carry
// a server's status message, of any length.
const maxProbeError = 256

// SetProbeState records the prober's state for a server. Connected and
// Listed confirm a server loaded from a snapshot.
func (r *Registry) SetProbeState(g pva.GUID, st ProbeState, probeErr error) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	w := r.write()
	defer w.abort()
	s := w.server(g)
	if s == nil {
		return ErrUnknownServer
	}
	info := s.row.Info
	info.ProbeState, info.ProbedAt, info.ProbeError = st, r.clk.Now(), ""
	if probeErr != nil {
		info.ProbeError = probeErr.Error()
		if len(info.ProbeError) > maxProbeError {
			// It can carry the server's own status message.
			info.ProbeError = strings.ToValidUTF8(info.ProbeError[:maxProbeError], "") + "…"
		}
	}
	if st == ProbeConnected || st == ProbeListed {
		info.Verified = true
	}
	r.putRow(w, s, &info)
	r.commit(w)
	return nil
}
