// Package registry is the daemon's memory: which servers exist, which PV
// names each one claims, and how and when each fact was learned.
//
// It owns the go-memdb database (tables "servers" and "conflicts"), the
// read-optimized name index every search is answered from, duplicate-claim
// bookkeeping, the field-name rule, the bounds on servers and names, and the
// snapshot file. It does not own sockets, beacon expiry (internal/beacon),
// probing (internal/probe) or waiting clients (internal/resolver).
//
// # Two stores, one writer
//
// A row per name in go-memdb costs ~540-1,080 heap bytes and ~3 µs per
// lookup at 1M names (measured, see docs/PERFORMANCE.md), while the search
// path must cost about one hash lookup per name. So go-memdb keeps what it is
// good at — one row per server (identity, endpoint, discovery, probe state,
// name counts) and one row per duplicate claim, with transactions and watch
// channels for the operator API — and the per-name truth lives in a plain Go
// map from name to a uint32 server slot (the "index"), plus each server's own
// []string name set sharing the same string data. All mutations are
// serialized by one writer mutex; the index is published to readers under a
// sync.RWMutex that the writer holds only while applying an already computed
// diff, so a reader sees a server's name set either wholly before or wholly
// after a replace, never half of it. LookupBatch takes the read lock once per
// batch, not per name.
//
// # Duplicate claims
//
// The first claim on a name stays (the spec's first-reply-wins). Every later
// claim by another server is a row in "conflicts" (both GUIDs, the claim
// order); Duplicates lists them with both endpoints. When the holder stops
// claiming the name (replace, removal, expiry) the earliest remaining
// claimant takes over.
//
// # Field names
//
// QSRV lists record names only, yet clients search "record.FIELD". With
// Options.FieldNames set, a name that nobody claims exactly and has the form
// record.FIELD (FIELD upper-case letters, digits or '_', optionally followed
// by '$' and/or a JSON channel filter starting with '{') is answered by the
// server claiming record. EPICS record names cannot contain '.', so the
// record is everything before the first '.'. An exact claim always wins.
//
// # Names and "how learned"
//
// A name's (source, time) is the source and time of the ReplaceNames that
// last listed it, or of the AddName(s) that added it since; stored per
// server and per exception rather than per name to stay within the memory
// budget. Names passed in are kept as given (strings are immutable), so a
// caller should not pass substrings of large buffers.
//
// # Snapshot
//
// SaveSnapshot writes the whole registry (servers, each one's names, which
// claims hold and which are duplicates, in claim order) to a temporary file
// and renames it over the target. LoadSnapshot, into an empty registry, marks
// every server unverified; a beacon (UpsertServer), probe result
// (ReplaceNames) or live probe state (SetProbeState) confirms it, and servers
// still unverified Options.UnverifiedTTL after the load are removed.
package registry
