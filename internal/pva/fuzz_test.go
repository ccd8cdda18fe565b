package pva

import (
	"bytes"
	"testing"
)

// Fuzz targets for every decoder, seeded with the captured payloads. Each
// asserts no panic, that errors are *DecodeError, and (where a decoded
// message can be re-encoded) that encode∘decode is stable: the bytes from
// the first re-encoding decode and re-encode to themselves. (The first
// re-encoding may differ from the input: cache forms, non-minimal sizes,
// an explicit OK status all have one canonical form.)

// seed adds every captured payload of cmd (fromServer: 0 client, 1 server,
// 2 either) as (payload, bigEndian).
func seed(f *testing.F, cmd Command, fromServer int) {
	for _, m := range captureMessages(f) {
		if m.H.Control() || m.H.Command != cmd {
			continue
		}
		if fromServer != 2 && m.H.FromServer() != (fromServer == 1) {
			continue
		}
		f.Add(bytes.Clone(m.Payload), m.H.BigEndian())
	}
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if _, ok := err.(*DecodeError); !ok {
		t.Fatalf("error is %T, not *DecodeError: %v", err, err)
	}
}

// stable checks enc(dec(x)) is a fixed point: decode again and re-encode.
func stable(t *testing.T, enc1 []byte, again func(payload []byte, be bool) ([]byte, error)) {
	t.Helper()
	h, p, rest, err := SplitMessage(enc1)
	if err != nil || len(rest) != 0 {
		t.Fatalf("re-encoding is not one message: %v", err)
	}
	enc2, err := again(p, h.BigEndian())
	if err != nil {
		t.Fatalf("re-encoding does not decode: %v\n%x", err, enc1)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("round trip unstable\n1: %x\n2: %x", enc1, enc2)
	}
}

func flagsFor(be bool) uint8 {
	if be {
		return FlagBigEndian
	}
	return 0
}

func FuzzSplitMessage(f *testing.F) {
	for _, b := range captureBlocks(f) {
		f.Add(bytes.Clone(b.Data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for len(data) > 0 {
			h, p, rest, err := SplitMessage(data)
			checkErr(t, err)
			if err != nil {
				return
			}
			if got := AppendHeader(nil, h); !bytes.Equal(got, data[:HeaderSize]) {
				t.Fatalf("header %x re-encoded as %x", data[:HeaderSize], got)
			}
			if len(p) != int(h.PayloadLen()) || len(rest) != len(data)-HeaderSize-len(p) {
				t.Fatalf("split lengths %d %d of %d", len(p), len(rest), len(data))
			}
			data = rest
		}
	})
}

func FuzzSearch(f *testing.F) {
	seed(f, CmdSearch, 2)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		var s Search
		err := s.Decode(payload, be)
		checkErr(t, err)
		sameAsReader(t, payload, be, &s, err)
		if err != nil {
			return
		}
		for _, n := range s.Names { // Off is where Name is in payload
			if o := int(n.Off); o+len(n.Name) > len(payload) || (len(n.Name) > 0 && &payload[o] != &n.Name[0]) {
				t.Fatalf("name %q at offset %d of %d bytes", n.Name, o, len(payload))
			}
		}
		stable(t, AppendSearch(nil, flagsFor(be), &s), func(p []byte, be bool) ([]byte, error) {
			var s2 Search
			err := s2.Decode(p, be)
			return AppendSearch(nil, flagsFor(be), &s2), err
		})
	})
}

func FuzzSearchResponse(f *testing.F) {
	seed(f, CmdSearchResponse, 2)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		var m SearchResponse
		err := m.Decode(payload, be)
		checkErr(t, err)
		if err != nil {
			return
		}
		stable(t, AppendSearchResponse(nil, flagsFor(be)|FlagServer, &m), func(p []byte, be bool) ([]byte, error) {
			var m2 SearchResponse
			err := m2.Decode(p, be)
			return AppendSearchResponse(nil, flagsFor(be)|FlagServer, &m2), err
		})
	})
}

func FuzzBeacon(f *testing.F) {
	seed(f, CmdBeacon, 2)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		var m Beacon
		err := m.Decode(payload, be)
		checkErr(t, err)
		if err != nil {
			return
		}
		stable(t, AppendBeacon(nil, flagsFor(be)|FlagServer, &m), func(p []byte, be bool) ([]byte, error) {
			var m2 Beacon
			err := m2.Decode(p, be)
			return AppendBeacon(nil, flagsFor(be)|FlagServer, &m2), err
		})
	})
}

func FuzzOriginTag(f *testing.F) {
	seed(f, CmdOriginTag, 2)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		a, err := DecodeOriginTag(payload, be)
		checkErr(t, err)
		if err == nil && !bytes.Equal(a[:], payload[:16]) {
			t.Fatalf("origin %v from %x", a, payload)
		}
	})
}

func FuzzForward(f *testing.F) {
	for _, n := range []int{3, 39, 92} {
		f.Add(bytes.Clone(block(f, n).Data))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, err := AppendForward(nil, lo, msg, lo)
		checkErr(t, err)
		if err != nil {
			return
		}
		h, p, rest, err := SplitMessage(out)
		if err != nil || h.Command != CmdOriginTag || len(p) != 16 {
			t.Fatalf("forward: %+v %v", h, err)
		}
		h2, p2, _, err := SplitMessage(rest)
		if err != nil || h2.Command != CmdSearch || p2[SearchOffFlags]&SearchUnicast != 0 {
			t.Fatalf("forwarded search: %+v %v", h2, err)
		}
	})
}

func FuzzServerValidation(f *testing.F) {
	seed(f, CmdConnectionValidation, 1)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		var m ServerValidation
		err := m.Decode(payload, be)
		checkErr(t, err)
		if err != nil {
			return
		}
		stable(t, AppendServerValidation(nil, flagsFor(be)|FlagServer, &m), func(p []byte, be bool) ([]byte, error) {
			var m2 ServerValidation
			err := m2.Decode(p, be)
			return AppendServerValidation(nil, flagsFor(be)|FlagServer, &m2), err
		})
	})
}

func FuzzClientValidation(f *testing.F) {
	seed(f, CmdConnectionValidation, 0)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		var m ClientValidation
		err := m.Decode(payload, be)
		checkErr(t, err)
		if err != nil {
			return
		}
		auth, err := m.Auth(be, &TypeCache{})
		checkErr(t, err)
		if err != nil {
			return
		}
		w := Writer{BE: be}
		AppendTypeValue(&w, auth)
		m.AuthPayload = w.B
		stable(t, AppendClientValidation(nil, flagsFor(be), &m), func(p []byte, be bool) ([]byte, error) {
			var m2 ClientValidation
			if err := m2.Decode(p, be); err != nil {
				return nil, err
			}
			if _, err := m2.Auth(be, &TypeCache{}); err != nil {
				return nil, err
			}
			return AppendClientValidation(nil, flagsFor(be), &m2), nil
		})
	})
}

func FuzzValidated(f *testing.F) {
	seed(f, CmdConnectionValidated, 1)
	f.Fuzz(func(t *testing.T, payload []byte, be bool) {
		st, err := DecodeConnectionValidated(payload, be)
		checkErr(t, err)
		if err != nil {
			return
		}
		stable(t, AppendConnectionValidated(nil, flagsFor(be), st), func(p []byte, be bool) ([]byte, error) {
			st2, err := DecodeConnectionValidated(p, be)
			return AppendConnectionValidated(nil, flagsFor(be), st2), err
		})
	})
}

// FuzzChannelMessages covers CREATE_CHANNEL (both directions),
// DESTROY_CHANNEL, DESTROY_REQUEST and MESSAGE; kind picks the decoder.
func FuzzChannelMessages(f *testing.F) {
	for _, m := range captureMessages(f) {
		switch m.H.Command {
		case CmdCreateChannel, CmdDestroyRequest:
			kind := uint8(0)
			if m.H.FromServer() {
				kind = 1
			}
			if m.H.Command == CmdDestroyRequest {
				kind = 3
			}
			f.Add(bytes.Clone(m.Payload), m.H.BigEndian(), kind)
		}
	}
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, true, uint8(2))
	f.Add([]byte{0, 0, 0, 1, 2, 3, 'a', 'b', 'c'}, false, uint8(4))
	f.Fuzz(func(t *testing.T, payload []byte, be bool, kind uint8) {
		fl := flagsFor(be)
		var dec func(p []byte, be bool) ([]byte, error)
		switch kind % 5 {
		case 0:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m CreateChannel
				err := m.Decode(p, be)
				return AppendCreateChannel(nil, fl, &m), err
			}
		case 1:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m CreateChannelReply
				err := m.Decode(p, be)
				return AppendCreateChannelReply(nil, fl, &m), err
			}
		case 2:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m DestroyChannel
				err := m.Decode(p, be)
				return AppendDestroyChannel(nil, fl, &m), err
			}
		case 3:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m RequestRef
				err := m.Decode(p, be)
				return AppendRequestRef(nil, fl, CmdDestroyRequest, &m), err
			}
		default:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m Message
				err := m.Decode(p, be)
				return AppendMessageMsg(nil, fl, &m), err
			}
		}
		enc, err := dec(payload, be)
		checkErr(t, err)
		if err == nil {
			stable(t, enc, dec)
		}
	})
}

func FuzzRPC(f *testing.F) {
	for _, m := range captureMessages(f) {
		if m.H.Command == CmdRPC {
			f.Add(bytes.Clone(m.Payload), m.H.BigEndian(), m.H.FromServer())
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, be, fromServer bool) {
		fl := flagsFor(be)
		dec := func(p []byte, be bool) ([]byte, error) {
			if fromServer {
				var m RPCReply
				err := m.Decode(p, be, &TypeCache{})
				return AppendRPCReply(nil, fl|FlagServer, &m), err
			}
			var m RPCRequest
			err := m.Decode(p, be, &TypeCache{})
			return AppendRPCRequest(nil, fl, &m), err
		}
		enc, err := dec(payload, be)
		checkErr(t, err)
		if err == nil {
			stable(t, enc, dec)
		}
	})
}

func FuzzGet(f *testing.F) {
	for _, m := range captureMessages(f) {
		if m.H.Command == CmdGet {
			f.Add(bytes.Clone(m.Payload), m.H.BigEndian(), m.H.FromServer())
		}
	}
	typ := NTScalarDoubleType()
	f.Fuzz(func(t *testing.T, payload []byte, be, fromServer bool) {
		fl := flagsFor(be)
		dec := func(p []byte, be bool) ([]byte, error) {
			if fromServer {
				var m GetReply
				err := m.Decode(p, be, &TypeCache{}, typ)
				return AppendGetReply(nil, fl|FlagServer, &m), err
			}
			var m GetRequest
			err := m.Decode(p, be, &TypeCache{})
			return AppendGetRequest(nil, fl, &m), err
		}
		enc, err := dec(payload, be)
		checkErr(t, err)
		if err == nil {
			stable(t, enc, dec)
		}
	})
}

// typeValueSeeds are the "type + value" parts of the captured RPC, GET and
// validation messages, and the pvdata test values.
func typeValueSeeds(f *testing.F) {
	for _, m := range captureMessages(f) {
		p := m.Payload
		switch {
		case m.H.Command == CmdRPC && !m.H.FromServer() && len(p) > 9:
			f.Add(bytes.Clone(p[9:]), m.H.BigEndian())
		case m.H.Command == CmdRPC && m.H.FromServer() && len(p) > 6:
			f.Add(bytes.Clone(p[6:]), m.H.BigEndian())
		case m.H.Command == CmdConnectionValidation && !m.H.FromServer():
			var v ClientValidation
			if v.Decode(p, m.H.BigEndian()) == nil {
				f.Add(bytes.Clone(v.AuthPayload), m.H.BigEndian())
			}
		}
	}
	f.Add(encodeTV(false, everyValue()), false)
	f.Add(encodeTV(true, everyValue()), true)
}

func FuzzTypeValue(f *testing.F) {
	typeValueSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, be bool) {
		tc := &TypeCache{}
		// twice through one cache: the second pass may reuse keys the first defined
		for range 2 {
			r := NewReader(data, be, "fuzz")
			v := ReadTypeValue(&r, "v", tc)
			checkErr(t, r.Err())
			if r.Failed() || v == nil {
				return
			}
			w := Writer{BE: be}
			AppendTypeValue(&w, v)
			v2, err := DecodeTypeValue(w.B, be, "fuzz", nil)
			if err != nil {
				t.Fatalf("plain re-encoding does not decode: %v\n%x", err, w.B)
			}
			w2 := Writer{BE: be}
			AppendTypeValue(&w2, v2)
			if !bytes.Equal(w.B, w2.B) {
				t.Fatalf("unstable\n%x\n%x", w.B, w2.B)
			}
			// the walkers used on decoded types must stay bounded
			if v.Type.NumBits() > MaxValueNodes {
				t.Fatalf("NumBits %d", v.Type.NumBits())
			}
		}
	})
}

func FuzzNT(f *testing.F) {
	typeValueSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, be bool) {
		v, err := DecodeTypeValue(data, be, "fuzz", &TypeCache{})
		checkErr(t, err)
		if err != nil {
			return
		}
		if _, op, err := NTURIOp(v); err == nil {
			// an op found by name survives a rebuild as PVXS's NTURI
			w := Writer{BE: be}
			AppendTypeValue(&w, NewNTURI("server", op))
			v2, err := DecodeTypeValue(w.B, be, "fuzz", nil)
			if _, op2, err2 := NTURIOp(v2); err != nil || err2 != nil || op2 != op {
				t.Fatalf("op %q -> %q %v %v", op, op2, err, err2)
			}
		}
		if names, err := ChannelListNames(v); err == nil {
			w := Writer{BE: be}
			AppendTypeValue(&w, NewChannelList(names))
			v2, err := DecodeTypeValue(w.B, be, "fuzz", nil)
			n2, err2 := ChannelListNames(v2)
			if err != nil || err2 != nil || len(n2) != len(names) {
				t.Fatalf("names %q -> %q %v %v", names, n2, err, err2)
			}
		}
	})
}
