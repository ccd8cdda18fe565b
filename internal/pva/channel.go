package pva

import "strconv"

// ChannelRequest is one (CID, name) of a CREATE_CHANNEL request.
type ChannelRequest struct {
	CID  uint32
	Name string
}

// CreateChannel is a CREATE_CHANNEL request (client → server): PVXS sends
// one channel per message but accepts several; pvAccessCPP requires one.
type CreateChannel struct {
	Channels []ChannelRequest
}

// Decode decodes the request, reusing m.Channels. Names are copied: a
// server keeps them for the channel's lifetime.
func (m *CreateChannel) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_CREATE_CHANNEL")
	n := int(r.U16("count"))
	if !r.Failed() && n*5 > r.Remaining() { // u32 CID + at least a 1-byte Size
		r.Fail("count", "count "+strconv.Itoa(n)+" exceeds payload")
	}
	m.Channels = m.Channels[:0]
	for i := 0; i < n && !r.Failed(); i++ {
		cid := r.U32("cid")
		name := r.String("name")
		m.Channels = append(m.Channels, ChannelRequest{CID: cid, Name: name})
	}
	return r.Err()
}

// AppendCreateChannel appends a CREATE_CHANNEL request message.
func AppendCreateChannel(dst []byte, flags uint8, m *CreateChannel) []byte {
	w, start := NewMessage(dst, flags, CmdCreateChannel)
	w.U16(uint16(len(m.Channels)))
	for _, c := range m.Channels {
		w.U32(c.CID)
		w.String(c.Name)
	}
	return FinishMessage(w.B, start)
}

// RefusedSID is the SID PVXS puts in a refused CREATE_CHANNEL reply.
const RefusedSID = 0xFFFFFFFF

// CreateChannelReply is the server's answer: no access-rights field in
// either implementation.
type CreateChannelReply struct {
	CID    uint32
	SID    uint32
	Status Status
}

// Decode decodes a CREATE_CHANNEL reply.
func (m *CreateChannelReply) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_CREATE_CHANNEL(reply)")
	m.CID = r.U32("cid")
	m.SID = r.U32("sid")
	m.Status = r.Status("status")
	return r.Err()
}

// AppendCreateChannelReply appends a CREATE_CHANNEL reply message.
func AppendCreateChannelReply(dst []byte, flags uint8, m *CreateChannelReply) []byte {
	w, start := NewMessage(dst, flags, CmdCreateChannel)
	w.U32(m.CID)
	w.U32(m.SID)
	w.Status(m.Status)
	return FinishMessage(w.B, start)
}

// DestroyChannel is DESTROY_CHANNEL, the same 8 bytes in both directions.
type DestroyChannel struct {
	SID uint32
	CID uint32
}

// Decode decodes DESTROY_CHANNEL.
func (m *DestroyChannel) Decode(payload []byte, bigEndian bool) (err error) {
	m.SID, m.CID, err = decodeIDPair(payload, bigEndian, "CMD_DESTROY_CHANNEL", "sid", "cid")
	return err
}

// AppendDestroyChannel appends DESTROY_CHANNEL.
func AppendDestroyChannel(dst []byte, flags uint8, m *DestroyChannel) []byte {
	return appendIDPair(dst, flags, CmdDestroyChannel, m.SID, m.CID)
}

// RequestRef names an operation: DESTROY_REQUEST and CANCEL_REQUEST carry
// just this (no reply).
type RequestRef struct {
	SID  uint32
	IOID uint32
}

// Decode decodes DESTROY_REQUEST or CANCEL_REQUEST.
func (m *RequestRef) Decode(payload []byte, bigEndian bool) (err error) {
	m.SID, m.IOID, err = decodeIDPair(payload, bigEndian, "CMD_DESTROY_REQUEST", "sid", "ioid")
	return err
}

// AppendRequestRef appends a DESTROY_REQUEST or CANCEL_REQUEST (cmd).
func AppendRequestRef(dst []byte, flags uint8, cmd Command, m *RequestRef) []byte {
	return appendIDPair(dst, flags, cmd, m.SID, m.IOID)
}

// decodeIDPair and appendIDPair are the layout DESTROY_CHANNEL,
// DESTROY_REQUEST and CANCEL_REQUEST share: two u32 IDs.
func decodeIDPair(payload []byte, bigEndian bool, msg, first, second string) (a, b uint32, err error) {
	r := NewReader(payload, bigEndian, msg)
	a, b = r.U32(first), r.U32(second)
	return a, b, r.Err()
}

func appendIDPair(dst []byte, flags uint8, cmd Command, a, b uint32) []byte {
	w, start := NewMessage(dst, flags, cmd)
	w.U32(a)
	w.U32(b)
	return FinishMessage(w.B, start)
}

// Message levels of CMD_MESSAGE.
const (
	MessageInfo    = 0
	MessageWarning = 1
	MessageError   = 2
	MessageFatal   = 3
)

// Message is CMD_MESSAGE: a server's text about an operation.
type Message struct {
	IOID  uint32
	Level uint8
	Text  string
}

// Decode decodes CMD_MESSAGE.
func (m *Message) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_MESSAGE")
	m.IOID = r.U32("ioid")
	m.Level = r.U8("level")
	m.Text = r.String("message")
	return r.Err()
}
