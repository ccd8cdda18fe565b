package pvaconn

import "sync/atomic"

// Counters count connections closed by a limit or a protocol fault. One
// Counters is normally shared by every connection of a listener (or of the
// prober); metrics read it through Stats.
type Counters struct {
	ProtocolErrors    atomic.Uint64 // bad magic/version, direction bit, segmentation, undecodable handshake
	Oversize          atomic.Uint64 // header or reassembly above MaxMessage
	SendQueueFull     atomic.Uint64 // peer not reading: queue above SendQueueBytes
	IdleTimeouts      atomic.Uint64 // nothing received for IdleTimeout
	HandshakeTimeouts atomic.Uint64 // not validated within HandshakeTimeout
	MessageTimeouts   atomic.Uint64 // a started message not completed within MessageTimeout
	WriteTimeouts     atomic.Uint64 // one write blocked for IdleTimeout
	ReadPauses        atomic.Uint64 // read loop paused: backlog above SendQueueBytes/2
	BudgetExceeded    atomic.Uint64 // closed: the listener's Budget could not cover its buffers
}

// Stats is a snapshot of Counters.
type Stats struct {
	ProtocolErrors    uint64
	Oversize          uint64
	SendQueueFull     uint64
	IdleTimeouts      uint64
	HandshakeTimeouts uint64
	MessageTimeouts   uint64
	WriteTimeouts     uint64
	ReadPauses        uint64
	BudgetExceeded    uint64
}

// Stats returns a snapshot.
func (c *Counters) Stats() Stats {
	return Stats{
		ProtocolErrors:    c.ProtocolErrors.Load(),
		Oversize:          c.Oversize.Load(),
		SendQueueFull:     c.SendQueueFull.Load(),
		IdleTimeouts:      c.IdleTimeouts.Load(),
		HandshakeTimeouts: c.HandshakeTimeouts.Load(),
		MessageTimeouts:   c.MessageTimeouts.Load(),
		WriteTimeouts:     c.WriteTimeouts.Load(),
		ReadPauses:        c.ReadPauses.Load(),
		BudgetExceeded:    c.BudgetExceeded.Load(),
	}
}
