package pva

import "encoding/hex"

// GUID is the 12-byte identity of a server instance; a new one on every
// server start. Copied verbatim on the wire (never byte-swapped).
type GUID [12]byte

// String renders the GUID as 24 lower-case hex digits, as PVXS logs it.
func (g GUID) String() string { return hex.EncodeToString(g[:]) }

// IsZero reports whether every byte is zero.
func (g GUID) IsZero() bool { return g == GUID{} }

// ParseGUID parses 24 hex digits (an optional 0x prefix is accepted).
func ParseGUID(s string) (GUID, error) {
	var g GUID
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s = s[2:]
	}
	if len(s) != 24 {
		return g, &DecodeError{Msg: "GUID", Field: "text", Reason: "want 24 hex digits"}
	}
	if _, err := hex.Decode(g[:], []byte(s)); err != nil {
		return g, &DecodeError{Msg: "GUID", Field: "text", Reason: err.Error()}
	}
	return g, nil
}

// pvansMark opens every pvans GUID, so that one pvans tells another
// (a replica) from the servers it lists, from any datagram or answer that
// carries the GUID: beacons, discovery answers, TCP validation. It must
// come from the GUID because another replica may refuse our TCP
// connections (access.tcp_client_allow), leaving only its UDP. A PVXS or
// pvAccessCPP GUID is random: one opens with these 5 bytes once in 2^40.
var pvansMark = [...]byte{'p', 'v', 'a', 'n', 's'}

// PvansGUID returns g with the pvans mark in its first bytes; the rest
// (56 bits) stays as given, so pass random bytes.
func PvansGUID(g GUID) GUID {
	copy(g[:], pvansMark[:])
	return g
}

// IsPvans reports whether g carries the pvans mark: another pvans.
func (g GUID) IsPvans() bool { return [len(pvansMark)]byte(g[:len(pvansMark)]) == pvansMark }
