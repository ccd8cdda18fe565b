package pva

// Values PVXS sends in CONNECTION_VALIDATION (ignored by every receiver).
const (
	DefaultBufferSize   = 0x00010000
	DefaultRegistrySize = 0x7FFF
)

// ServerValidation is the CONNECTION_VALIDATION a server sends right after
// SET_BYTE_ORDER: buffer size, introspection registry size and the auth
// methods it offers, in increasing preference order.
type ServerValidation struct {
	BufferSize   uint32
	RegistrySize uint16
	AuthMethods  []string
}

// Decode decodes the server form.
func (m *ServerValidation) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_CONNECTION_VALIDATION(server)")
	m.BufferSize = r.U32("bufferSize")
	m.RegistrySize = r.U16("registrySize")
	n := r.Size("authMethods.count")
	if !r.Failed() && n > r.Remaining() {
		r.Fail("authMethods.count", "count exceeds payload")
	}
	m.AuthMethods = m.AuthMethods[:0]
	for i := 0; i < n && !r.Failed(); i++ {
		m.AuthMethods = append(m.AuthMethods, r.String("authMethods"))
	}
	return r.Err()
}

// AppendServerValidation appends the server form (flags should carry
// FlagServer and the connection's byte order).
func AppendServerValidation(dst []byte, flags uint8, m *ServerValidation) []byte {
	w, start := NewMessage(dst, flags, CmdConnectionValidation)
	w.U32(m.BufferSize)
	w.U16(m.RegistrySize)
	w.Size(len(m.AuthMethods))
	for _, a := range m.AuthMethods {
		w.String(a)
	}
	return FinishMessage(w.B, start)
}

// ClientValidation is the CONNECTION_VALIDATION a client answers with.
// AuthPayload is the raw "type + value" that follows the method (0xFF for
// anonymous; a {user, host} structure for "ca"); a server needs only the
// method, so the payload is kept raw and decoded on demand.
type ClientValidation struct {
	BufferSize   uint32
	RegistrySize uint16
	QoS          uint16
	AuthMethod   string
	AuthPayload  []byte
}

// Decode decodes the client form. AuthPayload is a view into payload.
func (m *ClientValidation) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_CONNECTION_VALIDATION(client)")
	m.BufferSize = r.U32("bufferSize")
	m.RegistrySize = r.U16("registrySize")
	m.QoS = r.U16("qos")
	m.AuthMethod = r.String("authMethod")
	m.AuthPayload = nil
	if !r.Failed() {
		m.AuthPayload = r.B[r.Off:]
	}
	return r.Err()
}

// AppendClientValidation appends the client form. A nil AuthPayload is
// sent as the null type 0xFF.
func AppendClientValidation(dst []byte, flags uint8, m *ClientValidation) []byte {
	w, start := NewMessage(dst, flags, CmdConnectionValidation)
	w.U32(m.BufferSize)
	w.U16(m.RegistrySize)
	w.U16(m.QoS)
	w.String(m.AuthMethod)
	w.rawTypeValue(m.AuthPayload)
	return FinishMessage(w.B, start)
}

// CAAuthPayload builds the "ca" auth payload PVXS sends: a structure with
// no ID and string members user and host, then their values.
func CAAuthPayload(bigEndian bool, user, host string) []byte {
	w := Writer{BE: bigEndian}
	w.B = append(w.B, 0x80, 0x00, 0x02, 0x04, 'u', 's', 'e', 'r', 0x60, 0x04, 'h', 'o', 's', 't', 0x60)
	w.String(user)
	w.String(host)
	return w.B
}

// DecodeConnectionValidated decodes CONNECTION_VALIDATED: one Status.
func DecodeConnectionValidated(payload []byte, bigEndian bool) (Status, error) {
	r := NewReader(payload, bigEndian, "CMD_CONNECTION_VALIDATED")
	s := r.Status("status")
	return s, r.Err()
}

// AppendConnectionValidated appends CONNECTION_VALIDATED carrying s.
func AppendConnectionValidated(dst []byte, flags uint8, s Status) []byte {
	w, start := NewMessage(dst, flags, CmdConnectionValidated)
	w.Status(s)
	return FinishMessage(w.B, start)
}

// AppendEcho appends a CMD_ECHO with the given payload (servers answer an
// echo with the same payload bytes).
func AppendEcho(dst []byte, flags uint8, payload []byte) []byte {
	dst, start := beginMessage(dst, flags, CmdEcho)
	dst = append(dst, payload...)
	return FinishMessage(dst, start)
}

// AppendMessage appends an arbitrary application message with a raw
// payload (used by tests and for commands with no typed encoder).
func AppendMessage(dst []byte, flags uint8, cmd Command, payload []byte) []byte {
	dst, start := beginMessage(dst, flags, cmd)
	dst = append(dst, payload...)
	return FinishMessage(dst, start)
}

// Auth decodes AuthPayload ("type + full value"; nil for the null type).
// tc is the connection's client→server cache: pvAccessCPP clients send
// this structure through the 0xFD cache form, and later messages reuse the
// keys it defines, so a server must decode it even if it ignores the user.
func (m *ClientValidation) Auth(bigEndian bool, tc *TypeCache) (*Value, error) {
	return DecodeTypeValue(m.AuthPayload, bigEndian, "CMD_CONNECTION_VALIDATION(client).auth", tc)
}
