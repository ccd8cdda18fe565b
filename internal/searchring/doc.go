// Package searchring is the client search ring used for search-through: it
// decides WHAT names to search for and WHEN, exactly as a PVXS client does
// (docs/protocol.md, "The client search ring", "Search replies at the
// client", "Re-entry into search", "Name servers in PVXS clients"), and
// hands the packed CMD_SEARCH datagrams to a Transport.
//
// It owns: one Channel (with its own CID) per distinct unresolved name, the
// 30-bucket timer wheel with its 1 s tick, the 10 ms initial coalescing
// list, cohort splitting, hurry-up (Poke) with its 30 s hold-off and 200 ms
// fast revolution, the abandoned-Channel sweep, reply processing
// (first-reply-wins, GUID ignore list, duplicate claims) and re-entry into
// search when a claim proves broken.
//
// It does not own: sockets (the UDP search socket, the upstream TCP
// name-server connections and their 10 s reconnect are the Transport's),
// decoding replies off the wire (the caller passes a decoded
// pva.SearchResponse), discovery pings and beacon tracking (a negative
// reply is simply not a claim here), the registry (a resolution is reported
// through the Resolved callback) or waiter bookkeeping (the resolver calls
// Want when the first waiter for a name appears and Drop when the last one
// goes).
//
// Time enters only through internal/clock, so every schedule is tested
// exactly with clock.Fake.
package searchring
