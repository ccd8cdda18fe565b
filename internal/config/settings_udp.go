package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// udpRows adds the udp.* settings, beside each other so a part's settings
// are read together.
func udpRows() {
	add(bytesSpec("udp.receive_buffer_bytes", "SO_RCVBUF of the UDP socket; 0 keeps the OS default", 0, 1<<30,
		func(c *Config) *int64 { return &c.UDP.ReceiveBufferBytes }),
		"4MiB", live("UDP sockets, at once (0 leaves the current buffer until a restart)", "udp_buffer"),
		"SO_RCVBUF of the search socket; reply and search bursts overrun small buffers. 0 keeps the OS default (capped by net.core.rmem_max).")
	add(boolSpec("udp.answer_searches", nil, false, "answer UDP searches with names from the registry",
		func(c *Config) *bool { return &c.UDP.AnswerSearches }),
		"true", live("UDP policy, next datagram", "udp"),
		"Answer UDP searches with names from the registry.")
	add(boolSpec("udp.answer_over_tcp", nil, false, "answer a client's UDP searches over its own TCP name-server connection when the two are paired (same search over both)",
		func(c *Config) *bool { return &c.UDP.AnswerOverTCP }),
		"true", live("UDP policy, next datagram", "udp"),
		"Answer a client's UDP searches over its own TCP name-server connection once the two are paired (it sent the same search over both), where no answer is lost; false answers them over UDP only (docs/operations.md, \"Big clients\").")
	add(boolSpec("udp.send_beacons", nil, false, "announce the daemon with its own beacons",
		func(c *Config) *bool { return &c.UDP.SendBeacons }),
		"false", live("pvans's own beacons start (a beacon at once) or stop", "beacons", "destinations"),
		"Announce the daemon with its own beacons (to beacon_addr_list).")
	add(spec{key: "udp.learn_interfaces", ptr: field(func(c *Config) *[]netip.Addr { return &c.UDP.LearnInterfaces }), isList: true,
		usage: "local interface addresses whose networks servers are learned from (beacons, discovery replies and search replies; the arrival interface decides, see \"UDP binding\"), in place of pva.interfaces's; the automatic address list (auto_addr_list) follows them; all takes them from every interface; empty: pva.interfaces's",
		set: func(c *Config, x *loadCtx, v raw) error {
			var items []string
			all := false
			for _, it := range v.items {
				if strings.EqualFold(it, "all") {
					all = true
				} else {
					items = append(items, it)
				}
			}
			l, groups, err := parseInterfaces(items, x.resolve)
			if err != nil {
				return err
			}
			if len(groups) > 0 {
				return fmt.Errorf("%s is a multicast group, not an interface address", groups[0].Addr())
			}
			if all {
				l = []netip.Addr{netip.IPv4Unspecified()}
			}
			c.UDP.LearnInterfaces = l
			return nil
		},
		get: func(c *Config) string {
			if slices.ContainsFunc(c.UDP.LearnInterfaces, netip.Addr.IsUnspecified) {
				return "all"
			}
			return joinStrings(c.UDP.LearnInterfaces)
		}},
		"", live("UDP policy, next datagram; destinations, next discovery round", "udp", "destinations"),
		"The interfaces (by local address) whose networks servers are learned from, in place of pva.interfaces's, or [all]: a gateway host serves clients on one leg (pva.interfaces) and learns servers on the other. Discovery and search-through sent by auto_addr_list go only to these interfaces' broadcast addresses. Hints from elsewhere are counted when dropped: pvans_hints_dropped_total{reason=\"interface\"}.")
	add(floatSpec("udp.client_reply_names_per_second", "names answered over UDP to one client socket per second beyond its burst, later replies held and sent when due; 0 = no pacing", 0, 1e9,
		func(c *Config) *float64 { return &c.UDP.ClientReplyNamesPerSecond }),
		"40000", restart("the reply pacer is made when the UDP side is built"),
		"Names answered to one client socket a second beyond a burst of 4,096 (udpsearch.DefaultReplyBurst), later replies held and sent when due, so a big client's start-up burst (thousands of replies at once) does not overflow its receive buffer; 0 turns pacing off.")
}
