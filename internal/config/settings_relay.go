package config

import (
	"strconv"
)

// relayRows adds the relay.* settings, beside each other so a part's settings
// are read together.
func relayRows() {
	add(relayToSpec(endpointListSpec("relay.to", nil,
		"central pvans instances every accepted beacon and discovery reply is relayed to, naming the server's address (host[:port], default port broadcast_port); the central side accepts them only from its access.trusted_relays; multicast and broadcast destinations only with relay.to_broadcast; a discovery ping from one of their addresses gets every server heard first hand within beacon.expiry sent to that one again; empty: no relaying",
		func(c *Config) uint16 { return c.PVA.BroadcastPort },
		func(c *Config) *[]Endpoint { return &c.Relay.To })),
		"", live("relay, next sighting (its host names resolved in the next DNS round)", "relay", "dns"),
		"Central pvans instances each accepted beacon and discovery reply is sent on to, naming the server's own address (host[:port], default port pva.broadcast_port). They must list this host in access.trusted_relays. A multicast or broadcast destination is refused unless relay.to_broadcast is set.")
	// Relays relaying to a group of relays relay to each other; a relay
	// passes on only what it heard first hand, and a broadcast destination
	// is more often a pasted pva.addr_list than a choice.
	add(boolSpec("relay.to_broadcast", nil, false, "relay.to may name multicast and broadcast destinations (otherwise such an entry is refused, and one a host name resolves to is skipped)",
		func(c *Config) *bool { return &c.Relay.ToBroadcast }),
		"false", live("relay, next sighting", "relay"),
		"Lets relay.to name multicast and broadcast destinations; without it such an entry is an error, and an address a relay.to host name resolves to that is one (or a broadcast of this host's networks) is skipped (logged).")
	add(spec{key: "relay.only", ptr: field(func(c *Config) *bool { return &c.Relay.Only }), usage: "the relay profile (pvans relay): no TCP name server, no answers to UDP searches; sightings are only relayed, never listed here",
		isBool: true, set: setTo(func(c *Config) *bool { return &c.Relay.Only }, fromText(ParseBool)),
		get: func(c *Config) string { return strconv.FormatBool(c.Relay.Only) },
		check: func(c *Config) string {
			if c.Relay.Only && len(c.Relay.To) == 0 {
				return "needs relay.to"
			}
			return ""
		}},
		"false", restart("the profile decides at start whether the TCP name server is opened"),
		"The relay profile (what `pvans relay` runs): no TCP name server, no answers to UDP searches; sightings are only relayed.")
}
