package registry

import (
	"errors"
	"net/netip"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// Source says how a fact (a server, or a server's claim on a name) was
// learned.
type Source uint8

// Sources, in the words of the design.
const (
	SourceUnknown       Source = iota
	SourceBeacon               // a beacon named the server
	SourceDiscovery            // a reply to a discovery ping named it
	SourceStatic               // configured
	SourceSearchThrough        // a positive search reply on a server network
	SourceProbe                // listed by the server's "server" PV (op=channels)
	sourceEnd
)

var sourceNames = [...]string{"unknown", "beacon", "discovery", "static", "search-through", "probe"}

func (s Source) String() string {
	if s < sourceEnd {
		return sourceNames[s]
	}
	return "invalid"
}

// ProbeState is where the prober is with a server.
type ProbeState uint8

// Probe states. Connected and Listed confirm a server loaded from a snapshot.
const (
	ProbeNone       ProbeState = iota // never probed
	ProbeConnecting                   // connecting or listing
	ProbeConnected                    // connected (echo running), listing done or pending
	ProbeListed                       // names listed and kept under watch
	ProbeFailed                       // last attempt failed; see ProbeError
	probeEnd
)

var probeNames = [...]string{"none", "connecting", "connected", "listed", "failed"}

func (p ProbeState) String() string {
	if p < probeEnd {
		return probeNames[p]
	}
	return "invalid"
}

// ServerInfo is everything the registry knows about one server.
type ServerInfo struct {
	GUID     pva.GUID
	Addr     netip.AddrPort // TCP endpoint clients connect to
	Protocol string         // "tcp" (or "tls"); "tcp" if empty on upsert
	// TLS is the server's Secure PVAccess endpoint, as its answer to a
	// search offering "tls" over a TCP listing connection named it; zero
	// if it has none (or none known). Only a listing (Listed) sets it,
	// and only at Addr's address (a server names only its TLS port).
	TLS netip.AddrPort
	// Identity is the certificate the server proved over TLS at the last
	// listing (subject and issuer; keychain.Identity), "" if none: see the
	// trust rule in Listed. Only a listing sets it; it is not kept in the
	// snapshot (the next listing proves it again).
	Identity string
	Version  uint8 // PVA protocol version it announced

	Discovered  Source // how the server was first learned
	FirstSeen   time.Time
	LastSeen    time.Time
	ChangeCount uint16 // the beacon's change count, as last seen

	ProbeState ProbeState
	ProbeError string // last probe error, "" if none
	ProbedAt   time.Time

	Names     int       // names this server claims (held or duplicate)
	Held      int       // of those, names it is the holder (answerer) of
	ListedAt  time.Time // last ReplaceNames
	ListedHow Source

	// Verified is false for a server loaded from a snapshot until a probe
	// result or live probe connection confirms it (a beacon does not).
	Verified bool
	LoadedAt time.Time
}

// Holder is the hot path's view of a server: what a CMD_SEARCH_RESPONSE
// needs. A *Holder is immutable; a changed endpoint yields a new one, so it
// may be kept and compared by pointer after the lookup returns.
type Holder struct {
	ID   uint32 // slot in the registry; reused after removal
	GUID pva.GUID
	// TLSPort is the port of ServerInfo.TLS (0: none), which is always
	// at Addr's address: a port keeps the struct as small as before TLS.
	TLSPort  uint16
	Addr     netip.AddrPort
	Protocol string
}

// NameInfo is one held name as the operator API lists it.
type NameInfo struct {
	Name     string
	GUID     pva.GUID
	Addr     netip.AddrPort
	TLS      netip.AddrPort // the holder's TLS endpoint, zero if none
	How      Source
	At       time.Time
	Claimant int // number of other servers also claiming it (duplicates)
}

// Duplicate is one duplicate claim: Claimant also claims Name, which Holder
// answers for (first claim wins).
type Duplicate struct {
	Name           string
	Holder         pva.GUID
	HolderAddr     netip.AddrPort
	Claimant       pva.GUID
	ClaimantAddr   netip.AddrPort
	Since          time.Time
	ClaimantSource Source
	// The certificate identities the two proved over TLS ("" if none).
	HolderIdentity, ClaimantIdentity string
}

// Counts is the registry's size.
type Counts struct {
	Servers        int
	Unverified     int
	Names          int // distinct names answered for
	Claims         int // (server, name) pairs, duplicates included
	DuplicateNames int // names claimed by more than one server
	Duplicates     int // non-holding claims
}

// Errors.
var (
	ErrUnknownServer = errors.New("registry: unknown server")
	ErrServerLimit   = errors.New("registry: server limit reached")
	ErrNameLimit     = errors.New("registry: name limit reached")
	ErrNotEmpty      = errors.New("registry: snapshot load needs an empty registry")
	ErrSnapshot      = errors.New("registry: bad snapshot")
	// ErrEndpointHeld: a hint named an endpoint another server holds, or a
	// known server at another endpoint; only a TCP listing (Listed) may
	// change who is at an endpoint.
	ErrEndpointHeld = errors.New("registry: endpoint held by another server; a TCP listing must confirm the change")
	// ErrIdentity: a listing at the endpoint of a server proven over TLS
	// did not prove the same certificate identity.
	ErrIdentity = errors.New("registry: the server at this endpoint was proven over TLS; a new one must prove the same certificate identity, or the old one's watch must end")
	// ErrGUIDElsewhere: a listing named a GUID registered at another
	// endpoint.
	ErrGUIDElsewhere = errors.New("registry: GUID registered at another endpoint")
)
