package pva

import (
	"bytes"
	"errors"
	"testing"
)

// Every captured message, re-encoded in the other byte order, decodes
// (with that message's own order bit) back to the same content.
func TestCaptureBothByteOrders(t *testing.T) {
	orig, flipped := newCapState(), newCapState()
	for _, m := range captureMessages(t) {
		if m.H.Control() {
			continue
		}
		_, re, err := decodeCaptured(orig, m)
		if err != nil {
			t.Fatal(err)
		}
		_, reFlip, err := decodeCapturedAs(orig, m, m.H.Flags^FlagBigEndian)
		if err != nil {
			t.Fatal(err)
		}
		h, p, rest, err := SplitMessage(reFlip)
		if err != nil || len(rest) != 0 || h.BigEndian() == m.H.BigEndian() {
			t.Fatalf("#%d: flipped header %+v %v", m.Block, h, err)
		}
		if m.TCP && m.H.Command != CmdSearch && bytes.Equal(p, re[HeaderSize:]) && len(p) > 1 &&
			m.H.Command != CmdConnectionValidated {
			t.Errorf("#%d: byte order made no difference: %x", m.Block, p)
		}
		back := capMsg{Block: m.Block, TCP: m.TCP, Conn: m.Conn, H: h, Payload: p, Raw: reFlip}
		_, reBack, err := decodeCapturedAs(flipped, back, m.H.Flags)
		if err != nil || !bytes.Equal(reBack, re) {
			t.Fatalf("#%d: other byte order does not round-trip: %v\n got %x\nwant %x", m.Block, err, reBack, re)
		}
	}
}

// Every strict prefix of a captured payload fails with a DecodeError that
// names the message and field; none panics.
func TestCaptureTruncatedPayloadsFail(t *testing.T) {
	s := newCapState()
	lenient := map[Command]bool{CmdBeacon: true, CmdEcho: true}
	for _, m := range captureMessages(t) {
		if m.H.Control() {
			continue
		}
		if _, _, err := decodeCaptured(s, m); err != nil { // prime caches and GET types
			t.Fatal(err)
		}
		for n := 0; n < len(m.Payload); n++ {
			short := m
			short.Payload = m.Payload[:n]
			_, _, err := decodeCaptured(s, short)
			if err == nil {
				if !lenient[m.H.Command] {
					t.Errorf("#%d %v: prefix of %d/%d bytes decoded without error", m.Block, m.H.Command, n, len(m.Payload))
				}
				continue
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				if m.H.Command == CmdGet && len(short.Payload) < 4 {
					continue // the test harness's own IOID peek
				}
				t.Fatalf("#%d: %T %v", m.Block, err, err)
			}
			if de.Msg == "" || de.Field == "" || de.Reason == "" {
				t.Errorf("#%d: unnamed error %+v", m.Block, de)
			}
		}
	}
}

func TestDestroyChannelMessageEcho(t *testing.T) {
	for _, be := range []uint8{0, FlagBigEndian} {
		b := AppendDestroyChannel(nil, be|FlagServer, &DestroyChannel{SID: 0x01020304, CID: 0x0A0B0C0D})
		h, p, rest, err := SplitMessage(b)
		if err != nil || len(rest) != 0 || h.Command != CmdDestroyChannel || len(p) != 8 {
			t.Fatalf("%x %v", b, err)
		}
		var d DestroyChannel
		if err := d.Decode(p, h.BigEndian()); err != nil || d.SID != 0x01020304 || d.CID != 0x0A0B0C0D {
			t.Fatalf("%+v %v", d, err)
		}
		if be != 0 && p[0] != 0x01 || be == 0 && p[0] != 0x04 {
			t.Fatalf("byte order not applied: %x", p)
		}
		b = AppendMessageMsg(nil, be|FlagServer, &Message{IOID: 7, Level: MessageWarning, Text: "hello"})
		h, p, _, _ = SplitMessage(b)
		var msg Message
		if err := msg.Decode(p, h.BigEndian()); err != nil || msg != (Message{7, MessageWarning, "hello"}) {
			t.Fatalf("%+v %v", msg, err)
		}
		if err := msg.Decode(p[:6], h.BigEndian()); err == nil {
			t.Fatal("truncated MESSAGE decoded")
		}
		b = AppendRequestRef(nil, be, CmdCancelRequest, &RequestRef{SID: 1, IOID: 2})
		h, p, _, _ = SplitMessage(b)
		var rr RequestRef
		if err := rr.Decode(p, h.BigEndian()); err != nil || h.Command != CmdCancelRequest || rr != (RequestRef{1, 2}) {
			t.Fatalf("%+v %v", rr, err)
		}
	}
	// server echo answer: same payload, server flag (docs/protocol.md,
	// "ECHO and idle timeouts")
	if got := AppendEcho(nil, FlagServer, nil); !bytes.Equal(got, []byte{0xCA, 2, 0x40, 2, 0, 0, 0, 0}) {
		t.Fatalf("echo %x", got)
	}
}

func TestCreateChannelRefusedAndMany(t *testing.T) {
	rep := CreateChannelReply{CID: 5, SID: RefusedSID, Status: Status{Type: StatusFatal,
		Message: "Refused to create Channel", Stack: "pvx:serv:refusechan:"}}
	b := AppendCreateChannelReply(nil, FlagServer|FlagBigEndian, &rep)
	h, p, _, _ := SplitMessage(b)
	var got CreateChannelReply
	if err := got.Decode(p, h.BigEndian()); err != nil || got != rep || got.Status.OK() {
		t.Fatalf("%+v %v", got, err)
	}
	req := CreateChannel{Channels: []ChannelRequest{{1, "a"}, {2, "bb"}, {3, ""}}}
	b = AppendCreateChannel(nil, 0, &req)
	h, p, _, _ = SplitMessage(b)
	var d CreateChannel
	if err := d.Decode(p, h.BigEndian()); err != nil || len(d.Channels) != 3 || d.Channels[1] != req.Channels[1] {
		t.Fatalf("%+v %v", d, err)
	}
	// a count far beyond the payload fails before allocating
	if err := d.Decode([]byte{0xFF, 0xFF, 0, 0, 0, 1, 0}, true); err == nil {
		t.Fatal("huge count accepted")
	}
}

func TestRPCErrorReplyHasNoValue(t *testing.T) {
	m := RPCReply{IOID: 9, Status: Status{Type: StatusError, Message: "Not implemented"},
		Value: NewServerInfo("x", "y")}
	b := AppendRPCReply(nil, FlagServer, &m)
	h, p, _, _ := SplitMessage(b)
	var d RPCReply
	if err := d.Decode(p, h.BigEndian(), nil); err != nil || d.Value != nil || d.Status.Message != "Not implemented" {
		t.Fatalf("%+v %v", d, err)
	}
	if len(p) != 4+1+1+1+len("Not implemented")+1 {
		t.Fatalf("error reply carries a value: %x", p)
	}
}

// AppendMessageMsg appends CMD_MESSAGE (pvans only receives it).
func AppendMessageMsg(dst []byte, flags uint8, m *Message) []byte {
	w, start := NewMessage(dst, flags, CmdMessage)
	w.U32(m.IOID)
	w.U8(m.Level)
	w.String(m.Text)
	return FinishMessage(w.B, start)
}
