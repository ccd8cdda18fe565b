package registry

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/pva"
)

// Snapshot file layout (little endian, strings uvarint length + bytes):
//
//	"PVANSREG" u32 version
//	uvarint servers, then per server:
//	  GUID[12] addr protocol u8 version u8 discovered i64 firstSeen
//	  i64 lastSeen u16 changeCount u8 listedHow i64 listedAt
//	  [version 2:] string tlsAddr ("" if none)
//	  [version 3:] string tlsIdentity ("" if none)
//	  uvarint names, per name: string, u8 flags (1 held, 2 extra), if extra u8 how i64 at
//	uvarint duplicate claims in claim order, per claim: string name, GUID[12] claimant
//	u32 CRC-32 (IEEE) of everything before it
//
// Held names are loaded before duplicate claims, so the holders after a
// restart are the holders before it.
//
// The format version changes only when the layout does (docs/upgrading.md):
// a release reads its own version and every older one, and refuses a newer
// one with an error naming both, since it cannot know the newer layout.
const (
	snapMagic   = "PVANSREG"
	snapVersion = 3 // 2: TLS endpoints; 3: TLS identities
)

// checkSnapVersion refuses a format version this build cannot read.
func checkSnapVersion(v uint32) error {
	switch {
	case v > snapVersion:
		return fmt.Errorf("%w: format version %d was written by a newer pvans; this pvans %s reads format versions up to %d",
			ErrSnapshot, v, buildinfo.Get(), snapVersion)
	case v == 0:
		return fmt.Errorf("%w: format version 0 does not exist (this pvans %s reads 1 to %d)", ErrSnapshot, buildinfo.Get(), snapVersion)
	}
	return nil
}

type snapWriter struct {
	b   *bytes.Buffer
	tmp [binary.MaxVarintLen64]byte
}

func (w *snapWriter) uv(v uint64) { w.b.Write(w.tmp[:binary.PutUvarint(w.tmp[:], v)]) }
func (w *snapWriter) str(s string) {
	w.uv(uint64(len(s)))
	w.b.WriteString(s)
}
func (w *snapWriter) u8(v uint8) { w.b.WriteByte(v) }
func (w *snapWriter) i64(t time.Time) {
	var v int64
	if !t.IsZero() {
		v = t.UnixNano()
	}
	w.b.Write(binary.LittleEndian.AppendUint64(w.tmp[:0], uint64(v)))
}

// SaveSnapshot writes the registry to path atomically: a temporary file in
// the same directory, synced, then renamed over path.
func (r *Registry) SaveSnapshot(path string) error {
	var buf bytes.Buffer
	r.encode(&buf)
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err = f.Write(buf.Bytes()); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // make the rename durable; best effort
		d.Close()
	}
	return nil
}

// encode holds wmu only while encoding into memory; no I/O under the lock.
func (r *Registry) encode(buf *bytes.Buffer) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	buf.Grow(64 + r.claims*34)
	w := &snapWriter{b: buf}
	buf.WriteString(snapMagic)
	buf.Write(binary.LittleEndian.AppendUint32(nil, snapVersion))
	txn := r.db.Txn(false) // as of the last commit: wmu keeps it the latest
	it, _ := txn.Get(tabServers, "slot")
	var servers []*server
	for o := it.Next(); o != nil; o = it.Next() {
		servers = append(servers, o.(*serverRow).srv)
	}
	w.uv(uint64(len(servers)))
	for _, s := range servers {
		in := &s.row.Info
		buf.Write(in.GUID[:])
		a := ""
		if in.Addr.IsValid() {
			a = in.Addr.String()
		}
		w.str(a)
		w.str(in.Protocol)
		w.u8(in.Version)
		w.u8(uint8(in.Discovered))
		w.i64(in.FirstSeen)
		w.i64(in.LastSeen)
		buf.Write(binary.LittleEndian.AppendUint16(nil, in.ChangeCount))
		w.u8(uint8(in.ListedHow))
		w.i64(in.ListedAt)
		t := ""
		if in.TLS.IsValid() {
			t = in.TLS.String()
		}
		w.str(t)
		w.str(in.Identity)
		w.uv(uint64(len(s.names)))
		for _, n := range s.names {
			w.str(n)
			var fl uint8
			if slot, ok := r.idx.get(n); ok && slot == s.slot {
				fl |= 1
			}
			l, extra := s.extra[n]
			if extra {
				fl |= 2
			}
			w.u8(fl)
			if extra {
				w.u8(uint8(l.how))
				w.i64(l.at)
			}
		}
	}
	it, _ = txn.Get(tabConflicts, "id")
	var rows []*conflictRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*conflictRow))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	w.uv(uint64(len(rows)))
	for _, c := range rows {
		w.str(c.Name)
		buf.Write(c.Claimant[:])
	}
	buf.Write(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(buf.Bytes())))
}

// snapReader walks the file in memory; the first short read sets err.
type snapReader struct {
	b   []byte
	off int
	err error
}

func (s *snapReader) read(n int) []byte {
	if s.err != nil {
		return nil
	}
	if n < 0 || len(s.b)-s.off < n {
		s.err = io.ErrUnexpectedEOF
		return nil
	}
	b := s.b[s.off : s.off+n]
	s.off += n
	return b
}

func (s *snapReader) uv() uint64 {
	if s.err != nil {
		return 0
	}
	v, n := binary.Uvarint(s.b[s.off:])
	if n <= 0 {
		s.err = fmt.Errorf("%w: bad varint", ErrSnapshot)
		return 0
	}
	s.off += n
	return v
}

// Smallest encoded size of each record: a count that the bytes left could
// not hold is damage (or an attack), refused before anything is allocated
// for it — a count is a claim, the bytes are the evidence.
const (
	minSnapServer = 12 + 1 + 1 + 1 + 1 + 8 + 8 + 2 + 1 + 8 + 1 // GUID … names count
	minSnapName   = 1 + 1                                      // empty string, flags
	minSnapDup    = 1 + 12                                     // empty name, GUID
)

// count reads a record count and checks that the bytes left can hold that
// many records of at least minSize bytes each.
func (s *snapReader) count(what string, minSize int) int {
	n := s.uv()
	if s.err != nil {
		return 0
	}
	if left := uint64(len(s.b) - s.off); n > left/uint64(minSize) {
		s.err = fmt.Errorf("%w: %d %s claimed, %d bytes left hold at most %d", ErrSnapshot, n, what, left, left/uint64(minSize))
		return 0
	}
	return int(n)
}

func (s *snapReader) str() string {
	n := s.uv()
	if n > 1<<20 {
		s.err = fmt.Errorf("%w: string of %d bytes", ErrSnapshot, n)
	}
	b := s.read(int(n))
	if b == nil {
		return ""
	}
	return string(b)
}

func (s *snapReader) u8() uint8 {
	if b := s.read(1); b != nil {
		return b[0]
	}
	return 0
}

func (s *snapReader) i64() time.Time {
	b := s.read(8)
	if b == nil {
		return time.Time{}
	}
	v := int64(binary.LittleEndian.Uint64(b))
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

type snapName struct {
	name string
	fl   uint8
	l    learned
}

type snapServer struct {
	info  ServerInfo
	names []snapName
}

// LoadSnapshot fills an empty registry from path. Every server is marked
// unverified and is dropped if not confirmed within UnverifiedTTL (a timer
// on the registry's clock calls expireUnverified). A missing file is
// reported as an error wrapping os.ErrNotExist; a damaged one as
// ErrSnapshot, leaving the registry empty.
func (r *Registry) LoadSnapshot(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(data) < 4 || crc32.ChecksumIEEE(data[:len(data)-4]) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return fmt.Errorf("%w: checksum mismatch or truncated", ErrSnapshot)
	}
	sr := &snapReader{b: data[:len(data)-4]}
	if m := sr.read(len(snapMagic)); sr.err != nil || string(m) != snapMagic {
		return fmt.Errorf("%w: not a registry snapshot", ErrSnapshot)
	}
	v := sr.read(4)
	if sr.err != nil {
		return fmt.Errorf("%w: truncated header", ErrSnapshot)
	}
	version := binary.LittleEndian.Uint32(v)
	if err := checkSnapVersion(version); err != nil {
		return err
	}
	minServer := minSnapServer
	if version >= 2 {
		minServer++ // the TLS endpoint string
	}
	if version >= 3 {
		minServer++ // the TLS identity string
	}
	ns := sr.count("servers", minServer)
	if sr.err != nil {
		return sr.err
	}
	// Never more room than the registry could hold: servers beyond
	// MaxServers are skipped below anyway.
	servers := make([]snapServer, 0, min(ns, r.opts.MaxServers))
	for i := 0; i < ns && sr.err == nil; i++ {
		var s snapServer
		in := &s.info
		copy(in.GUID[:], sr.read(12))
		if a := sr.str(); a != "" {
			ap, err := netip.ParseAddrPort(a)
			if err != nil && sr.err == nil {
				sr.err = fmt.Errorf("%w: endpoint %q", ErrSnapshot, a)
			}
			in.Addr = ap
		}
		in.Protocol = sr.str()
		in.Version = sr.u8()
		in.Discovered = Source(sr.u8())
		in.FirstSeen = sr.i64()
		in.LastSeen = sr.i64()
		if b := sr.read(2); b != nil {
			in.ChangeCount = binary.LittleEndian.Uint16(b)
		}
		in.ListedHow = Source(sr.u8())
		in.ListedAt = sr.i64()
		if version >= 2 {
			if a := sr.str(); a != "" {
				ap, err := netip.ParseAddrPort(a)
				if err != nil && sr.err == nil {
					sr.err = fmt.Errorf("%w: TLS endpoint %q", ErrSnapshot, a)
				}
				in.TLS = ap
			}
		}
		if version >= 3 {
			in.Identity = sr.str()
		}
		nn := sr.count("names", minSnapName)
		if sr.err != nil {
			return sr.err
		}
		s.names = make([]snapName, 0, min(nn, r.opts.MaxNames))
		for j := 0; j < nn && sr.err == nil; j++ {
			e := snapName{name: sr.str(), fl: sr.u8()}
			if e.fl&2 != 0 {
				e.l.how = Source(sr.u8())
				e.l.at = sr.i64()
			}
			s.names = append(s.names, e)
		}
		servers = append(servers, s)
	}
	type dupClaim struct {
		name string
		g    pva.GUID
	}
	nd := sr.count("duplicate claims", minSnapDup)
	if sr.err != nil {
		return sr.err
	}
	dups := make([]dupClaim, 0, min(nd, r.opts.MaxNames))
	for i := 0; i < nd && sr.err == nil; i++ {
		d := dupClaim{name: sr.str()}
		copy(d.g[:], sr.read(12))
		dups = append(dups, d)
	}
	if sr.err == nil && sr.off != len(sr.b) {
		sr.err = fmt.Errorf("%d trailing bytes", len(sr.b)-sr.off)
	}
	if sr.err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, sr.err)
	}

	r.wmu.Lock()
	var added []string
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	if r.serverCount() != 0 {
		return ErrNotEmpty
	}
	now := r.clk.Now()
	w := r.write()
	defer w.abort()
	var dl dupLog
	loaded := make([]*server, 0, len(servers))
	total := 0
	for i := range servers {
		total += len(servers[i].names)
	}
	r.reserveIndex(total) // one rebuild up front, not one per doubling
	r.imu.Lock()
	for i := range servers {
		ss := &servers[i]
		if r.serverCount() >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			continue
		}
		if w.server(ss.info.GUID) != nil {
			continue
		}
		info := ss.info
		info.Verified, info.LoadedAt = false, now
		s := r.newServerLocked(&info)
		loaded = append(loaded, s)
		s.names = make([]string, 0, len(ss.names))
		for _, e := range ss.names {
			if e.fl&2 != 0 {
				if s.extra == nil {
					s.extra = make(map[string]learned)
				}
				s.extra[e.name] = e.l
			}
			if e.fl&1 == 0 {
				continue // a duplicate claim: after every holder is in place
			}
			if !r.nameFits(e.name) {
				continue
			}
			if r.claims >= r.opts.MaxNames {
				r.st.nameLimit.Add(1)
				continue
			}
			if _, taken := r.idx.get(e.name); taken {
				continue // damaged: two holders; the first stays
			}
			r.idx.set(e.name, s.slot)
			s.held++
			r.claims++
			s.names = append(s.names, e.name)
			added = append(added, e.name)
		}
		r.putRow(w, s, &info)
	}
	for _, d := range dups {
		s := w.server(d.g)
		if s == nil || r.claims >= r.opts.MaxNames || !r.nameFits(d.name) || r.claimsLocked(w, s, d.name) {
			continue
		}
		h := r.claimLocked(w, s, d.name, s.row.Info.ListedHow, now, &dl)
		if h {
			added = append(added, d.name)
		}
		r.claims++
		s.names = append(s.names, d.name)
	}
	r.imu.Unlock()
	for _, s := range loaded {
		info := s.row.Info
		r.putRow(w, s, &info)
	}
	r.commit(w)
	if r.expiry != nil {
		r.expiry.Stop()
	}
	r.loadedAt = r.clk.Now()
	r.expiry = nil
	if r.opts.UnverifiedTTL > 0 {
		r.expiry = r.clk.AfterFunc(r.opts.UnverifiedTTL, func() { r.expireUnverified(r.clk.Now()) })
	}
	r.log.Debug("registry snapshot loaded", zap.String("path", path),
		zap.Int("servers", r.serverCount()), zap.Int("claims", r.claims))
	return nil
}
