// Package udpsearch owns pvans's part in PVAccess UDP name resolution on
// the search port (5076): the shared wildcard sockets, the classification
// of every datagram by destination and arrival interface, the loopback
// multicast forwarding of unicast searches (docs/protocol.md, "Unicast
// forwarding"), the answers to searches and discovery pings, pvans's own
// beacons, and separate client sockets for discovery pings and
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
// The Server keeps one value per address family: its search port socket,
// its client socket, its beacon socket and the handlers of the first two;
// a datagram pvans sends leaves from the socket of its destination's
// family. IPv4 is always served: the search port socket (0.0.0.0:5076) and
// a client socket on an ephemeral port. With Options.IPv6 the same pair is
// opened for IPv6 beside them ([::]:5076 with IPV6_V6ONLY, and a client
// socket on the IPv4 client socket's port), as PVXS does; a host without
// IPv6 runs on IPv4 alone, with a warning. pvans's own beacons go out from
// the beacon socket of each open family, opened once beacons are on. The
// sockets are Linux's (IP_PKTINFO, SO_REUSEPORT, recvmmsg); elsewhere
// Listen fails and only the handler works.
//
// An IPv4 unicast search is handled once: forwarded to the loopback group
// (only while another socket on the host shares the search port, as
// sock_diag tells) from a socket of its own, and answered from the
// original; pvans's own copy coming back from the group is known by that
// socket's address and dropped unread. IPv6 searches are never forwarded
// (PVXS forwards only IPv4 unicast searches): each is answered directly.
//
// Start launches one receive goroutine per row of one table of receiving
// sockets (Server.receivers): the search port and client sockets of each
// open family, two rows with IPv4 alone, four with IPv6. A row names the
// socket, its handler, its receive batch, its kernel drop counter, and
// whether its replies are held for one sendmmsg after each receive batch
// (only the IPv4 search port's are). Each goroutine receives datagrams in
// batches (recvmmsg) and runs its row's handler on them. With a
// BeaconSink, Start launches one more goroutine, which drains the bounded
// queue of sightings into the tracker, so that no receive loop waits on
// the registry's writer (a sighting that finds the queue full is dropped
// and counted). Everything else runs from timers
// (Options.Clock): the periodic interface refresh
// (Options.InterfaceRefresh), pvans's own beacons while they are on, and,
// with Options.ReplyRate set, the queue of paced replies, which sends held
// replies when they are due. Close waits for the receive goroutines, not
// for a delivery to the tracker in progress.
//
// Each handler keeps its scratch buffers between datagrams, so a search
// for names pvans does not hold costs a decode and one hash lookup per
// name, and allocates nothing.
package udpsearch
