package udpsearch

import "net/netip"

// pairing finds the client's own TCP name-server connection for this
// search (h.twin), or whether one may yet be found (h.candidate). Only a
// search that came straight from the socket its replies go to is
// compared (a PVXS client searches from the socket its replies come to):
// a forwarded copy's reply address, and any search's reply port, are the
// sender's word alone, and another process of the client's host could
// name the client's port.
// Called only when Options.Twins is set: pairing is optional, and costs
// the search path a nil check when off.
func (h *handler) pairing(o origin, d *datagram, dest netip.AddrPort, payload []byte) {
	tw := h.o.Twins
	if !h.p.AnswerOverTCP || (o != originUnicast && o != originBroadcast) || netip.AddrPortFrom(d.src.Addr().Unmap(), d.src.Port()) != dest {
		return
	}
	if fp, ok := tw.Fingerprint(payload); ok {
		h.twin, h.candidate = tw.UDPSearch(dest, fp)
	}
}
