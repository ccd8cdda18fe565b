package pva

import (
	"encoding/binary"
	"errors"
)

// SearchName is one (CID, name) pair of a CMD_SEARCH. Name is a view into
// the receive buffer when decoded: valid only as long as that buffer is, so
// a caller that keeps it must copy it (the choice, and its cost, is theirs).
//
// Off is where Name starts in the payload Decode read it from, so a caller
// can slice a stretch of names from the payload without walking it
// (insight stages them so). It means nothing in a SearchName built by hand
// (0: a decoded name never starts there); a caller checks it against the
// payload before trusting it. It sits in CID's padding: no bigger value.
type SearchName struct {
	CID  uint32
	Off  uint32
	Name []byte
}

// Search flags (CMD_SEARCH).
const (
	SearchMustReply = 0x01
	SearchUnicast   = 0x80
)

// SearchSeqFind is the constant searchSequenceID PVXS sends ("find").
const SearchSeqFind = 0x66696e64

// Search is a CMD_SEARCH payload. Decode fills a reused value: Names and
// Protocols are views into the decoded buffer (see SearchName).
type Search struct {
	Seq       uint32
	Flags     uint8
	ReplyAddr Address
	ReplyPort uint16
	Protocols [][]byte
	Names     []SearchName
}

// MustReply reports the MustReply flag.
func (s *Search) MustReply() bool { return s.Flags&SearchMustReply != 0 }

// Unicast reports the Unicast flag.
func (s *Search) Unicast() bool { return s.Flags&SearchUnicast != 0 }

// IsDiscovery reports a discovery ping: no protocols, no names
// (docs/protocol.md, "The discovery ping").
func (s *Search) IsDiscovery() bool { return len(s.Protocols) == 0 && len(s.Names) == 0 }

// HasProtocol reports whether p is in the protocol list.
func (s *Search) HasProtocol(p string) bool {
	for _, q := range s.Protocols {
		if string(q) == p {
			return true
		}
	}
	return false
}

// Search payload offsets, for in-place edits when forwarding.
const (
	SearchOffFlags     = 4
	SearchOffReplyAddr = 8
	SearchOffReplyPort = 24
	searchFixed        = 26 // seq, flags, reserved, address, port
)

// SetSearchUnicast sets or clears the Unicast flag of a whole CMD_SEARCH
// message (header included) in place, as a PVXS client does per search
// destination (client.cpp tickSearch: set for a unicast destination,
// cleared for a broadcast or multicast one). It reports false, changing
// nothing, when msg is not a CMD_SEARCH long enough to have the flags.
func SetSearchUnicast(msg []byte, unicast bool) bool {
	if len(msg) < HeaderSize+searchFixed || msg[0] != Magic || Command(msg[3]) != CmdSearch {
		return false
	}
	if unicast {
		msg[HeaderSize+SearchOffFlags] |= SearchUnicast
	} else {
		msg[HeaderSize+SearchOffFlags] &^= SearchUnicast
	}
	return true
}

// maxSearchNames bounds the pre-sized name slice from a count field; a
// name costs at least 5 bytes, so count is also checked against the payload.
const minNameBytes = 5

// Decode decodes a CMD_SEARCH payload in the given byte order into s,
// reusing s's slices. Names are views into payload.
func (s *Search) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_SEARCH")
	s.Seq = r.U32("searchSequenceID")
	s.Flags = r.U8("flags")
	r.Skip(3, "reserved")
	s.ReplyAddr = r.Address("replyAddress")
	s.ReplyPort = r.U16("replyPort")
	np := r.Size("protocols.count")
	s.Protocols = s.Protocols[:0]
	if !r.Failed() && np > r.Remaining() {
		r.Fail("protocols.count", "count exceeds payload")
	}
	for i := 0; i < np && !r.Failed(); i++ {
		s.Protocols = append(s.Protocols, r.StringBytes("protocols"))
	}
	n := int(r.U16("count"))
	s.Names = s.Names[:0]
	if !r.Failed() && n*minNameBytes > r.Remaining() {
		r.Fail("count", "count exceeds payload")
	}
	for i := 0; i < n && !r.Failed(); i++ {
		// The names are the bulk of every search the daemon answers: read
		// straight from the payload while a name's size is one byte (under
		// 254, as every name but a pvAccessCPP client's longest is) and
		// its bytes are there. Anything else (a long or null name, a short
		// payload) goes through the Reader, which decodes it the same way
		// and says what is wrong.
		if b := r.B[r.Off:]; len(b) >= minNameBytes && b[4] < 0xFE && int(b[4]) <= len(b)-minNameBytes {
			cid := binary.LittleEndian.Uint32(b)
			if bigEndian {
				cid = binary.BigEndian.Uint32(b)
			}
			at, end := r.Off+minNameBytes, r.Off+minNameBytes+int(b[4])
			s.Names = append(s.Names, SearchName{CID: cid, Off: uint32(at), Name: r.B[at:end:end]})
			r.Off = end
			continue
		}
		cid := r.U32("names.cid")
		name := r.StringBytes("names.name")
		s.Names = append(s.Names, SearchName{CID: cid, Off: uint32(r.Off - len(name)), Name: name})
	}
	return r.Err()
}

// searchHead appends the fixed part of a CMD_SEARCH payload, before the
// protocols (AppendSearch, SearchPacker).
func (w *Writer) searchHead(seq uint32, flags uint8, replyAddr Address, replyPort uint16) {
	w.U32(seq)
	w.U8(flags)
	w.B = append(w.B, 0, 0, 0) // reserved
	w.Address(replyAddr)
	w.U16(replyPort)
}

// AppendSearch appends a whole CMD_SEARCH message (header included).
// flags carries the header flags (byte order, direction).
func AppendSearch(dst []byte, flags uint8, s *Search) []byte {
	w, start := NewMessage(dst, flags, CmdSearch)
	w.searchHead(s.Seq, s.Flags, s.ReplyAddr, s.ReplyPort)
	w.Size(len(s.Protocols))
	for _, p := range s.Protocols {
		w.StringBytes(p)
	}
	w.U16(uint16(len(s.Names)))
	for _, n := range s.Names {
		w.U32(n.CID)
		w.StringBytes(n.Name)
	}
	return FinishMessage(w.B, start)
}

// SearchResponse is a CMD_SEARCH_RESPONSE payload.
type SearchResponse struct {
	GUID     GUID
	Seq      uint32
	Addr     Address
	Port     uint16
	Protocol []byte // view into the decoded buffer
	Found    bool
	CIDs     []uint32
}

// Decode decodes a CMD_SEARCH_RESPONSE payload into m, reusing m.CIDs.
func (m *SearchResponse) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_SEARCH_RESPONSE")
	m.GUID = r.GUID("guid")
	m.Seq = r.U32("searchSequenceID")
	m.Addr = r.Address("serverAddress")
	m.Port = r.U16("serverPort")
	m.Protocol = r.StringBytes("protocol")
	m.Found = r.U8("found") != 0
	n := int(r.U16("count"))
	m.CIDs = m.CIDs[:0]
	if !r.Failed() && n*4 > r.Remaining() {
		r.Fail("count", "count exceeds payload")
	}
	for i := 0; i < n && !r.Failed(); i++ {
		m.CIDs = append(m.CIDs, r.U32("cids"))
	}
	return r.Err()
}

// AppendSearchResponse appends a whole CMD_SEARCH_RESPONSE message.
func AppendSearchResponse(dst []byte, flags uint8, m *SearchResponse) []byte {
	return appendSearchResponse(dst, flags, m.GUID, m.Seq, m.Addr, m.Port, m.Protocol, m.Found, m.CIDs)
}

// AppendClaim appends a whole CMD_SEARCH_RESPONSE naming the server guid
// at addr:port in protocol for cids (found when there are any), echoing
// the search's seq: the answer path's form, whose protocol is a constant
// string, so nothing is copied into a SearchResponse per answer.
func AppendClaim(dst []byte, flags uint8, seq uint32, guid GUID, addr Address, port uint16, protocol string, cids []uint32) []byte {
	return appendSearchResponse(dst, flags, guid, seq, addr, port, protocol, len(cids) > 0, cids)
}

func appendSearchResponse[P string | []byte](dst []byte, flags uint8, guid GUID, seq uint32, addr Address, port uint16,
	protocol P, found bool, cids []uint32) []byte {
	w, start := NewMessage(dst, flags, CmdSearchResponse)
	w.GUID(guid)
	w.U32(seq)
	w.Address(addr)
	w.U16(port)
	w.Size(len(protocol))
	w.B = append(w.B, protocol...)
	if found {
		w.U8(1)
	} else {
		w.U8(0)
	}
	w.U16(uint16(len(cids)))
	for _, c := range cids {
		w.U32(c)
	}
	return FinishMessage(w.B, start)
}

// Beacon is a CMD_BEACON payload.
type Beacon struct {
	GUID        GUID
	Flags       uint8 // historically QoS; PVXS sends 0 and ignores it
	Sequence    uint8
	ChangeCount uint16
	Addr        Address
	Port        uint16
	Protocol    string
	// Status is the raw trailing server-status field (type + value); PVXS
	// sends the null type 0xFF and everyone ignores it. Empty if absent.
	Status []byte
}

// MaxProtocolLen bounds the protocol string of a beacon or search
// response pvans takes: the only ones it uses are "tcp" and "tls", so a
// longer one is refused before it is copied (ErrProtocolTooLong).
const MaxProtocolLen = 16

// ErrProtocolTooLong is a beacon whose protocol string exceeds
// MaxProtocolLen.
var ErrProtocolTooLong = errors.New("pva: protocol string longer than MaxProtocolLen")

// KnownProtocol returns "tcp" or "tls" without allocating when p is one
// of them, else p copied.
func KnownProtocol(p []byte) string {
	switch string(p) {
	case "tcp":
		return "tcp"
	case "tls":
		return "tls"
	}
	return string(p)
}

// Decode decodes a CMD_BEACON payload. Protocol is "tcp" or "tls" without
// a copy, any other one copied, one over MaxProtocolLen refused.
func (m *Beacon) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_BEACON")
	m.GUID = r.GUID("guid")
	m.Flags = r.U8("flags")
	m.Sequence = r.U8("sequence")
	m.ChangeCount = r.U16("changeCount")
	m.Addr = r.Address("serverAddress")
	m.Port = r.U16("serverPort")
	proto := r.StringBytes("protocol")
	if !r.Failed() && len(proto) > MaxProtocolLen {
		return &DecodeError{Msg: "CMD_BEACON", Field: "protocol", Off: r.Off, Reason: "longer than MaxProtocolLen", Cause: ErrProtocolTooLong}
	}
	m.Protocol = KnownProtocol(proto)
	m.Status = nil
	if !r.Failed() && r.Remaining() > 0 {
		m.Status = r.B[r.Off:]
	}
	return r.Err()
}

// AppendBeacon appends a whole CMD_BEACON message. A nil Status is sent as
// the null type 0xFF, as PVXS does.
func AppendBeacon(dst []byte, flags uint8, m *Beacon) []byte {
	w, start := NewMessage(dst, flags, CmdBeacon)
	w.GUID(m.GUID)
	w.U8(m.Flags)
	w.U8(m.Sequence)
	w.U16(m.ChangeCount)
	w.Address(m.Addr)
	w.U16(m.Port)
	w.String(m.Protocol)
	w.rawTypeValue(m.Status)
	return FinishMessage(w.B, start)
}

// DecodeOriginTag decodes a CMD_ORIGIN_TAG payload: the original
// destination address of a forwarded search. Trailing bytes are allowed
// (PVXS skips len-16), so newer peers may extend it.
func DecodeOriginTag(payload []byte, bigEndian bool) (Address, error) {
	r := NewReader(payload, bigEndian, "CMD_ORIGIN_TAG")
	a := r.Address("originAddress")
	return a, r.Err()
}

// AppendOriginTag appends a CMD_ORIGIN_TAG message.
func AppendOriginTag(dst []byte, flags uint8, origin Address) []byte {
	dst, start := beginMessage(dst, flags, CmdOriginTag)
	dst = append(dst, origin[:]...)
	return FinishMessage(dst, start)
}

// AppendForward appends the datagram a server sends to the loopback
// multicast group for a unicast search it received
// (docs/protocol.md, "Unicast forwarding"; capture #4): CMD_ORIGIN_TAG with
// the original destination, then the original search message with the
// Unicast flag cleared and the reply address replaced by the resolved reply
// destination. msg is the whole original CMD_SEARCH message (header
// included) and must be well formed.
func AppendForward(dst []byte, origin Address, msg []byte, reply Address) ([]byte, error) {
	h, payload, _, err := SplitMessage(msg)
	if err != nil {
		return dst, err
	}
	if h.Command != CmdSearch || len(payload) < searchFixed {
		return dst, &DecodeError{Msg: "CMD_SEARCH", Field: "payload", Reason: "not a search message"}
	}
	dst = AppendOriginTag(dst, FlagBigEndian, origin)
	at := len(dst)
	dst = append(dst, msg[:HeaderSize+len(payload)]...)
	p := dst[at+HeaderSize:]
	p[SearchOffFlags] &^= SearchUnicast
	copy(p[SearchOffReplyAddr:SearchOffReplyAddr+16], reply[:])
	return dst, nil
}
