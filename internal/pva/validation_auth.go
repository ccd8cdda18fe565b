package pva

// Auth decodes AuthPayload ("type + full value"; nil for the null type).
// tc is the connection's client→server cache: pvAccessCPP clients send
// this structure through the 0xFD cache form, and later messages reuse the
// keys it defines, so a server must decode it even if it ignores the user.
func (m *ClientValidation) Auth(bigEndian bool, tc *TypeCache) (*Value, error) {
	return DecodeTypeValue(m.AuthPayload, bigEndian, "CMD_CONNECTION_VALIDATION(client).auth", tc)
}
