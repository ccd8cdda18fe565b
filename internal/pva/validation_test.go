package pva

import (
	"bytes"
	"testing"
)

func TestServerGreetingMatchesCapture(t *testing.T) {
	// Capture block #7: SET_BYTE_ORDER + CONNECTION_VALIDATION from a PVXS server (LE).
	want := []byte{0xca, 0x02, 0x41, 0x02, 0, 0, 0, 0, 0xca, 0x02, 0x40, 0x01, 0x14, 0, 0, 0,
		0, 0, 1, 0, 0xff, 0x7f, 0x02, 0x09, 'a', 'n', 'o', 'n', 'y', 'm', 'o', 'u', 's', 0x02, 'c', 'a'}
	b := AppendSetByteOrder(nil, FlagServer)
	b = AppendServerValidation(b, FlagServer, &ServerValidation{BufferSize: DefaultBufferSize,
		RegistrySize: DefaultRegistrySize, AuthMethods: []string{"anonymous", "ca"}})
	if !bytes.Equal(b, want) {
		t.Fatalf("greeting\n got %x\nwant %x", b, want)
	}
	v := AppendConnectionValidated(nil, FlagServer, Status{})
	if !bytes.Equal(v, []byte{0xca, 0x02, 0x40, 0x09, 0x01, 0, 0, 0, 0xff}) {
		t.Fatalf("validated %x", v)
	}
}

func TestClientValidationCA(t *testing.T) {
	// Capture block #9: the PVXS client's answer with method "ca" (user and host empty).
	want := []byte{0xca, 0x02, 0x00, 0x01, 0x1c, 0, 0, 0, 0, 0, 1, 0, 0xff, 0x7f, 0, 0,
		0x02, 'c', 'a', 0x80, 0x00, 0x02, 0x04, 'u', 's', 'e', 'r', 0x60, 0x04, 'h', 'o', 's', 't', 0x60, 0, 0}
	m := ClientValidation{BufferSize: DefaultBufferSize, RegistrySize: DefaultRegistrySize, AuthMethod: "ca",
		AuthPayload: CAAuthPayload(false, "", "")}
	b := AppendClientValidation(nil, 0, &m)
	if !bytes.Equal(b, want) {
		t.Fatalf("client validation\n got %x\nwant %x", b, want)
	}
	h, p, _, err := SplitMessage(want)
	if err != nil {
		t.Fatal(err)
	}
	var d ClientValidation
	if err := d.Decode(p, h.BigEndian()); err != nil || d.AuthMethod != "ca" || len(d.AuthPayload) != 17 {
		t.Fatalf("decode: %v %+v", err, d)
	}
}
