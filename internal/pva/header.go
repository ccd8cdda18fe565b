package pva

import "encoding/binary"

// Header constants.
const (
	Magic      = 0xCA
	Version    = 2
	HeaderSize = 8
)

// Header flag bits (docs/protocol.md, "The header").
const (
	FlagControl   = 0x01
	FlagSegMask   = 0x30
	FlagSegFirst  = 0x10
	FlagSegLast   = 0x20
	FlagSegMiddle = 0x30
	FlagServer    = 0x40 // direction: set on everything a server sends
	FlagBigEndian = 0x80
)

// Command is an application command code (or control code when the header
// has FlagControl).
type Command uint8

// Application commands (pvaproto.h).
const (
	CmdBeacon               Command = 0x00
	CmdConnectionValidation Command = 0x01
	CmdEcho                 Command = 0x02
	CmdSearch               Command = 0x03
	CmdSearchResponse       Command = 0x04
	CmdAuthNZ               Command = 0x05
	CmdACLChange            Command = 0x06
	CmdCreateChannel        Command = 0x07
	CmdDestroyChannel       Command = 0x08
	CmdConnectionValidated  Command = 0x09
	CmdGet                  Command = 0x0A
	CmdPut                  Command = 0x0B
	CmdPutGet               Command = 0x0C
	CmdMonitor              Command = 0x0D
	CmdArray                Command = 0x0E
	CmdDestroyRequest       Command = 0x0F
	CmdProcess              Command = 0x10
	CmdGetField             Command = 0x11
	CmdMessage              Command = 0x12
	CmdMultipleData         Command = 0x13
	CmdRPC                  Command = 0x14
	CmdCancelRequest        Command = 0x15
	CmdOriginTag            Command = 0x16
)

// Control command codes (flags has FlagControl).
const (
	CtrlSetMarker    Command = 0
	CtrlAckMarker    Command = 1
	CtrlSetByteOrder Command = 2
)

var cmdNames = [...]string{
	"CMD_BEACON", "CMD_CONNECTION_VALIDATION", "CMD_ECHO", "CMD_SEARCH", "CMD_SEARCH_RESPONSE",
	"CMD_AUTHNZ", "CMD_ACL_CHANGE", "CMD_CREATE_CHANNEL", "CMD_DESTROY_CHANNEL",
	"CMD_CONNECTION_VALIDATED", "CMD_GET", "CMD_PUT", "CMD_PUT_GET", "CMD_MONITOR", "CMD_ARRAY",
	"CMD_DESTROY_REQUEST", "CMD_PROCESS", "CMD_GET_FIELD", "CMD_MESSAGE", "CMD_MULTIPLE_DATA",
	"CMD_RPC", "CMD_CANCEL_REQUEST", "CMD_ORIGIN_TAG",
}

func (c Command) String() string {
	if int(c) < len(cmdNames) {
		return cmdNames[c]
	}
	return "CMD_0x" + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])
}

// Header is the 8-byte PVA message header. For application messages Size is
// the payload length; for control messages it is a value and no payload
// follows.
type Header struct {
	Version uint8
	Flags   uint8
	Command Command
	Size    uint32
}

// BigEndian reports the byte order of this message (flags bit 7).
func (h Header) BigEndian() bool { return h.Flags&FlagBigEndian != 0 }

// Control reports whether this is a control message.
func (h Header) Control() bool { return h.Flags&FlagControl != 0 }

// FromServer reports the direction bit.
func (h Header) FromServer() bool { return h.Flags&FlagServer != 0 }

// Segment returns the segmentation bits (0 = unsegmented).
func (h Header) Segment() uint8 { return h.Flags & FlagSegMask }

// PayloadLen is the number of payload bytes that follow the header: Size
// for application messages, zero for control messages.
func (h Header) PayloadLen() uint32 {
	if h.Control() {
		return 0
	}
	return h.Size
}

// DecodeHeader decodes the first 8 bytes of b. It checks the magic byte and
// rejects version 0, as PVXS and pvAccessCPP do.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &DecodeError{Msg: "header", Field: "header", Off: 0, Reason: shortReason(HeaderSize, len(b))}
	}
	if b[0] != Magic {
		return Header{}, &DecodeError{Msg: "header", Field: "magic", Off: 0, Reason: "not 0xCA"}
	}
	if b[1] == 0 {
		return Header{}, &DecodeError{Msg: "header", Field: "version", Off: 1, Reason: "version 0 is invalid"}
	}
	h := Header{Version: b[1], Flags: b[2], Command: Command(b[3])}
	if h.BigEndian() {
		h.Size = binary.BigEndian.Uint32(b[4:8])
	} else {
		h.Size = binary.LittleEndian.Uint32(b[4:8])
	}
	return h, nil
}

// AppendHeader appends the 8-byte encoding of h (magic 0xCA).
func AppendHeader(dst []byte, h Header) []byte {
	v := h.Version
	if v == 0 {
		v = Version
	}
	dst = append(dst, Magic, v, h.Flags, byte(h.Command))
	if h.BigEndian() {
		return binary.BigEndian.AppendUint32(dst, h.Size)
	}
	return binary.LittleEndian.AppendUint32(dst, h.Size)
}

// AppendSetByteOrder appends the SET_BYTE_ORDER control message a server
// sends first on every connection. flags carries FlagServer and the byte
// order the sender will use (FlagBigEndian).
func AppendSetByteOrder(dst []byte, flags uint8) []byte {
	return AppendHeader(dst, Header{Flags: flags | FlagControl, Command: CtrlSetByteOrder})
}

// SplitMessage takes one message off the front of a datagram or stream
// buffer: its header, its payload and what follows. A message whose payload
// is not complete in b returns an error (for streams, read more first).
func SplitMessage(b []byte) (h Header, payload, rest []byte, err error) {
	h, err = DecodeHeader(b)
	if err != nil {
		return h, nil, b, err
	}
	n := h.PayloadLen()
	if uint64(len(b)-HeaderSize) < uint64(n) {
		return h, nil, b, &DecodeError{Msg: h.Command.String(), Field: "payload", Off: HeaderSize,
			Reason: shortReason(int(min(n, 1<<31-1)), len(b)-HeaderSize)}
	}
	return h, b[HeaderSize : HeaderSize+int(n)], b[HeaderSize+int(n):], nil
}

// beginMessage appends a header with a zero size; FinishMessage patches the
// size once the payload is written. start is the header's offset in dst.
func beginMessage(dst []byte, flags uint8, cmd Command) (out []byte, start int) {
	start = len(dst)
	return append(dst, Magic, Version, flags, byte(cmd), 0, 0, 0, 0), start
}

// NewMessage appends a header for cmd (size filled in by FinishMessage)
// and returns a Writer in the message's byte order positioned after it.
func NewMessage(dst []byte, flags uint8, cmd Command) (w Writer, start int) {
	dst, start = beginMessage(dst, flags, cmd)
	return Writer{B: dst, BE: flags&FlagBigEndian != 0}, start
}

// FinishMessage writes the size of the message NewMessage began at start
// into its header, once the payload is appended.
func FinishMessage(dst []byte, start int) []byte {
	n := uint32(len(dst) - start - HeaderSize)
	if dst[start+2]&FlagBigEndian != 0 {
		binary.BigEndian.PutUint32(dst[start+4:], n)
	} else {
		binary.LittleEndian.PutUint32(dst[start+4:], n)
	}
	return dst
}
