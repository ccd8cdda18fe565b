package pvaconn

import "github.com/pvans-project/pvans/internal/metrics"

// Counters count connections closed by a limit or a protocol fault. One
// Counters is shared by every connection of a listener; the name-server
// listener exports them with its own counters (tcpsearch.RegisterMetrics
// registers both as one declaration, which gives the family its help).
type Counters struct {
	ProtocolErrors    metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=protocol_error"` // bad magic/version, direction bit, segmentation, undecodable handshake
	Oversize          metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=message_size"`   // header or reassembly above MaxMessage
	SendQueueFull     metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=send_queue"`     // peer not reading: queue above SendQueueBytes
	IdleTimeouts      metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=idle_timeout"`   // nothing received for IdleTimeout
	HandshakeTimeouts metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=handshake"`      // not validated within HandshakeTimeout
	MessageTimeouts   metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=slow_message"`   // a started message not completed within MessageTimeout
	BudgetExceeded    metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=buffer_budget"`  // closed: the listener's Budget could not cover its buffers
	WriteTimeouts     metrics.Counter `metric:"-"`                                                       // one write blocked for IdleTimeout
	ReadPauses        metrics.Counter `metric:"-"`                                                       // read loop paused: backlog above SendQueueBytes/2
}
