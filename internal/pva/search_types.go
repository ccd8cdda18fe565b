package pva

// SearchName is one (CID, name) pair of a CMD_SEARCH. Name is a view into
// the receive buffer when decoded: valid only as long as that buffer is, so
// a caller that keeps it must copy it (the choice, and its cost, is theirs).
type SearchName struct {
	CID  uint32
	Name []byte
}
