// Package registry is the daemon's memory: which servers exist, which PV
// names each one claims, and how and when each fact was learned.
//
// # Trust: a UDP datagram is a hint; only TCP proves
//
// Anyone on the network can forge a beacon, a discovery reply or a search
// reply; nobody off the path can forge a TCP exchange. So the registry has
// two doors (docs/SECURITY.md, "Trust"):
//
//   - UpsertServer takes hints. It may create a server that has no names
//     yet and refresh a known one's last sighting, change count and
//     version. It never removes a server, never moves one to another
//     endpoint, never touches a name, and never confirms a server loaded
//     from a snapshot. A new GUID at an endpoint another server holds is
//     refused (ErrEndpointHeld): the caller checks it over TCP.
//   - Listed takes what a TCP exchange with the endpoint proved: the GUID
//     that answered there and the names it lists. Only it replaces a server
//     at its endpoint (one endpoint, one listener), handing the names both
//     list to the new GUID in place, so they keep answering and never pass
//     to another claimant in between. A GUID already registered at another
//     endpoint is not moved (ErrGUIDElsewhere): anyone can present any GUID
//     at an endpoint of their own.
//
// ReplaceNames and AddNames change names of a server the caller already
// has TCP evidence for (a listing, a confirmed TCP search, a static name
// file). RemoveServer is called on TCP evidence (the watch connection
// closed) or when no beacon arrived for the expiry and no watch connection
// answers. A static name file's server (ListedHow SourceStatic) is a claim
// of its own: it shares its endpoint with a real server and only its file
// removes it.
//
// It owns the go-memdb database (tables "servers", "conflicts" and
// "revision"), the read-optimized name index every search is answered from,
// duplicate-claim bookkeeping, the field-name rule, the bounds on servers and
// names, and the snapshot file. It does not own sockets, beacon expiry (internal/beacon),
// probing (internal/probe) or waiting clients (internal/resolver).
//
// # Two stores, one writer
//
// go-memdb is the one store of servers and claims:
//
//   - "servers": one row per server, its ServerInfo (endpoint, discovery,
//     probe state, name counts), keyed by the GUID's 12 bytes (a small
//     custom indexer), with an index "slot" (the uint32 the name index
//     stores per name) and an index "addr" (who is at an endpoint: one
//     endpoint, one listener);
//   - "conflicts": one row per duplicate claim (name, holder, claimant,
//     claim order), keyed by name and claimant, indexed by name;
//   - "revision": one row, the number of the last commit that changed the
//     two tables above, with the Counts as of that commit.
//
// Rows are never changed once inserted (a change inserts a copy), so a
// read transaction is a consistent snapshot that takes no registry lock:
// View returns the servers, duplicates and counts of one commit, with a
// watch channel (the revision row's) closed by the next commit that
// changes them; the operator API's long poll (GET /v1/changes) and the
// status page wait on it. The writer finds servers through the indexes:
// by GUID, by slot, by endpoint.
//
// A row per name in go-memdb costs ~540-1,080 heap bytes and ~3 µs per
// lookup at 1M names (measured, see docs/PERFORMANCE.md), while the search
// path must cost about one hash lookup per name. So the per-name truth
// lives beside memdb in one structure, the name index: a hash table from
// each held name to its holder's slot and its number of duplicate claims
// (the writer's "has claimants?" test, without a memdb read per name), and
// the slot table (slot → *Holder, the endpoint an answer names). What memdb
// cannot hold cheaply per server — its []string name set, whose string
// bytes the index entries share, the names learned outside a listing (how
// and when) and how many names it holds — is the writer's private state:
// it hangs off the server's row (every version of the row points at the
// same state), and only the writer, holding its mutex, follows it.
//
// All mutations are serialized by one writer mutex and commit one memdb
// transaction each; the index is published to readers under a
// sync.RWMutex that the writer holds only while applying an already
// computed diff, so a reader sees a server's name set either wholly before
// or wholly after a replace, never half of it. LookupBatch takes the read
// lock once per batch, not per name.
//
// # The name index
//
// At 1M names every lookup is a cache miss (and on a VM a TLB miss), so
// the index is designed around memory accesses, not instructions; a Go map
// costs ~270-450 ns per hit and ~110-250 ns per miss on the build VM, over
// the search path's budget. The index is an open-addressing table with
// linear probing at a load of at most 3/4 (just under 1/2 at the 1M
// site), in two parallel slices:
//
//   - tags []uint32: the top 32 bits of the name's hash/maphash value (0 is
//     empty), 4 bytes a slot, so the whole tag array of the 1M site is
//     8 MiB, a seventh of the table (fewer cache and TLB misses than
//     probing whole slots). A miss reads only tags and ends at the first
//     empty one: usually one line, no string compare.
//   - ents []entry: the name's string header (pointing at the bytes the
//     holder's name set already holds; the index never copies a name) and
//     the server slot. A hit reads its tag, its entry and the name bytes.
//
// LookupBatch exploits memory-level parallelism: it hashes every name of
// the batch and loads each home tag in one tight loop of independent loads,
// then probes and loads each candidate's entry, then its first name byte,
// then compares — so the 38 misses of a search overlap instead of queueing.
// This, more than the layout, is what a map lookup per name cannot do.
//
// Deletion shifts the rest of the cluster back (no tombstones). Growth and
// shrinking rebuild the table from the tags alone (the home slot is the
// tag's top bits; no rehashing, no string reads) while the writer holds only
// the writer mutex — readers keep using the old table, which only the
// writer could change — and swap it in under the RWMutex. Before applying a
// diff the writer reserves room for it, so readers never wait for a
// rebuild (at 1M names one takes ~20 ms of the writer's time, amortized
// over the doublings). The hash seed is random per registry, so remote
// servers cannot pick names that pile into one cluster.
//
// # Duplicate claims
//
// The first claim on a name stays (first reply wins, as in a PVXS client). Every later
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
// last listed it, or of the AddNames that added it since; stored per
// server and per exception rather than per name to stay within the memory
// budget. Names passed in are kept as given (strings are immutable), so a
// caller should not pass substrings of large buffers.
//
// # Snapshot
//
// SaveSnapshot writes the whole registry (servers, each one's names, which
// claims hold and which are duplicates, in claim order) to a temporary file
// and renames it over the target. LoadSnapshot, into an empty registry, marks
// every server unverified; a probe result (Listed, ReplaceNames), a name
// confirmed over TCP (AddNames) or live probe state (SetProbeState)
// confirms it — a beacon does not — and servers
// still unverified Options.UnverifiedTTL after the load are removed.
package registry
