package pva

import "fmt"

// DecodeError says which message and field could not be decoded and why.
type DecodeError struct {
	Msg    string // message or structure, e.g. "CMD_SEARCH"
	Field  string // field, e.g. "name[3]"
	Off    int    // offset in the payload where decoding stopped
	Reason string // e.g. "short buffer: need 4 bytes, have 2"
	Cause  error  // a sentinel callers test with errors.Is (ErrProtocolTooLong), or nil
}

// Unwrap gives errors.Is the cause.
func (e *DecodeError) Unwrap() error { return e.Cause }

func (e *DecodeError) Error() string {
	return fmt.Sprintf("pva: decode %s.%s at offset %d: %s", e.Msg, e.Field, e.Off, e.Reason)
}
