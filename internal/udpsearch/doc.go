// Package udpsearch owns pvans's part in PVAccess UDP name resolution on
// the search port (5076): the shared wildcard socket, the classification of
// every datagram by destination and arrival interface, the loopback
// multicast forwarding of unicast searches (docs/protocol.md, "Unicast
// forwarding"), the answers to searches and discovery pings, pvans's own
// beacons, and a separate client socket for discovery pings and
// search-through searches.
//
// Beacons, discovery replies and search replies are hints about servers;
// they are taken only from the interfaces pvans serves (Policy.LearnFrom),
// judged by the arrival interface the kernel reports, never by the sender's
// address.
//
// It does not decide which server holds a name (a Resolver does), does not
// track servers (a BeaconSink does), and does not run the client search
// ring (the search-through client hands it finished datagrams and receives
// the responses through a callback). It reads no configuration and no
// environment: Options carries plain values.
//
// A unicast search is handled once: forwarded to the loopback group (only
// while another socket on the host shares the search port, as sock_diag
// tells) from a socket of its own, and answered from the original; pvans's
// own copy coming back from the group is known by that socket's address and
// dropped unread.
//
// One goroutine receives on the search port and runs the per-datagram
// handler; the handler keeps its scratch buffers between datagrams so a
// search for names pvans does not hold costs a decode and one hash lookup
// per name, and allocates nothing. Only IPv4 searches are forwarded, as
// PVXS forwards only IPv4; an IPv6 one is answered directly.
package udpsearch
