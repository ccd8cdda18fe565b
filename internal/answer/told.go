package answer

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/resolver"
)

// The reasons a claim is withheld, as the claims-withheld metrics'
// reason label says them.
const (
	WithheldProtocol     = "protocol"      // the server's protocol is not one the client takes
	WithheldZeroEndpoint = "zero_endpoint" // the registry had a zero address or port
)

// Told is what a claim of server says to a client at to that takes off,
// under the address map m, decided by Claim's rule (decide) as every
// answer is but counted nowhere: the operator's view of an answer (the HTTP API's
// ?client=). withheld is why nothing is named (WithheldProtocol,
// WithheldZeroEndpoint), "" when c is what the client is told.
func Told(server resolver.Endpoint, off Offer, to netip.Addr, m addrmap.Map) (c Claim, withheld string) {
	if withheld = decide(&c, &server, off, to, m); withheld != "" {
		return Claim{}, withheld
	}
	return c, ""
}
