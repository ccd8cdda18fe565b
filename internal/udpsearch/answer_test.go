package udpsearch

import (
	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
)

// appendResponse is a UDP answer as the handler sends it (replyFlags,
// answer.Append): what the tests compare with and send as servers' replies.
func appendResponse(dst []byte, guid pva.GUID, seq uint32, addr pva.Address, port uint16, proto string, cids []uint32) []byte {
	return answer.Append(dst, replyFlags, seq, &answer.Claim{GUID: guid, Addr: addr, Port: port, Protocol: proto, CIDs: cids})
}
