package pva

import (
	"errors"
	"strconv"
)

// Search datagram limits (docs/protocol.md, "Packing search datagrams").
const (
	// MaxSearchDatagram keeps a search under a 1500-byte MTU with
	// Ethernet/IP/UDP headers: IP fragmentation of broadcast traffic costs
	// every host on the subnet.
	MaxSearchDatagram = 1400
	// MaxSearchBuffer is the largest message a name may still be sent in
	// alone (PVXS's 64 KiB send buffer).
	MaxSearchBuffer = 64 * 1024
)

// ErrNameTooLong is wrapped by SearchPacker.Pack for a name that cannot fit
// even alone in a 64 KiB message.
var ErrNameTooLong = errors.New("search name too long for a 64 KiB message")

// SearchOverhead is the fixed size of a search datagram (header included)
// for a protocol list: 41 bytes with ["tcp"].
func SearchOverhead(protocols []string) int {
	n := HeaderSize + searchFixed + SizeLen(len(protocols)) + 2
	for _, p := range protocols {
		n += SizeLen(len(p)) + len(p)
	}
	return n
}

// SearchNameCost is the bytes one (CID, name) adds: 5+len for names
// shorter than 254 bytes.
func SearchNameCost(nameLen int) int { return 4 + SizeLen(nameLen) + nameLen }

// SearchPacker packs (CID, name) pairs into search datagrams exactly as a
// PVXS client does: names are appended until the whole datagram would
// exceed Max bytes; that name starts the next datagram; a single name too
// long for an empty datagram is sent alone; a name too long for 64 KiB is
// refused with an error. The zero value is not ready: use NewSearchPacker.
type SearchPacker struct {
	Seq       uint32
	Flags     uint8 // search flags, e.g. SearchMustReply
	ReplyAddr Address
	ReplyPort uint16
	Protocols []string
	Max       int // datagram cap, MaxSearchDatagram by default
	buf       []byte
}

// NewSearchPacker returns a packer for ["tcp"] searches with PVXS's
// constant sequence ID and the 1400-byte cap.
func NewSearchPacker(replyPort uint16) *SearchPacker {
	return &SearchPacker{Seq: SearchSeqFind, ReplyPort: replyPort, Protocols: []string{"tcp"}, Max: MaxSearchDatagram}
}

// Pack emits datagrams holding names, in order. The slice passed to emit
// is reused by the next call: emit must send or copy it. Names refused as
// too long are reported together in the returned error; the rest are sent.
func (p *SearchPacker) Pack(names []SearchName, emit func(datagram []byte)) error {
	max := p.Max
	if max <= 0 {
		max = MaxSearchDatagram
	}
	var errs []error
	overhead := SearchOverhead(p.Protocols)
	count, countOff, start := 0, 0, 0
	flush := func() {
		if count == 0 {
			return
		}
		b := p.buf
		b[countOff] = byte(count >> 8)
		b[countOff+1] = byte(count)
		FinishMessage(b, start)
		emit(b)
		count = 0
	}
	for _, n := range names {
		cost := SearchNameCost(len(n.Name))
		if overhead+cost > MaxSearchBuffer {
			errs = append(errs, errors.New("name of "+strconv.Itoa(len(n.Name))+" bytes (CID "+
				strconv.FormatUint(uint64(n.CID), 10)+") refused: "+ErrNameTooLong.Error()))
			continue
		}
		if count > 0 && (len(p.buf)+cost > max || count == 0xFFFF) {
			flush()
		}
		if count == 0 {
			p.buf, countOff = p.begin()
		}
		w := Writer{B: p.buf, BE: true}
		w.U32(n.CID)
		w.StringBytes(n.Name)
		p.buf = w.B
		count++
	}
	flush()
	if len(errs) > 0 {
		return errors.Join(append([]error{ErrNameTooLong}, errs...)...)
	}
	return nil
}

// begin starts a datagram in p.buf (big endian, client direction, as every
// PVXS search is) and returns it and the offset of the count field.
func (p *SearchPacker) begin() ([]byte, int) {
	b, _ := beginMessage(p.buf[:0], FlagBigEndian, CmdSearch)
	w := Writer{B: b, BE: true}
	w.searchHead(p.Seq, p.Flags, p.ReplyAddr, p.ReplyPort)
	w.Size(len(p.Protocols))
	for _, s := range p.Protocols {
		w.String(s)
	}
	off := len(w.B)
	w.B = append(w.B, 0, 0)
	return w.B, off
}
