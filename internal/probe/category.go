package probe

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Probe failure categories, as operators see them (/v1/servers, events).
// A category says what went wrong without echoing the network's own
// words: the raw error of a connection to an arbitrary address:port would
// make pvans a port scanner's oracle, so it is logged at debug level only.
const (
	FailRefused    = "refused"    // nothing listens there (TCP reset on connect)
	FailTimeout    = "timeout"    // no answer in time (filtered, unreachable, silent)
	FailNotPVA     = "not_pva"    // something answered, but not a PVA server
	FailUnlistable = "unlistable" // a PVA server that refused or failed the listing
)

// Category maps a probe error to its category ("" for nil).
func Category(err error) string {
	var le *ListError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &le):
		return FailUnlistable
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, pvaconn.ErrIdleTimeout), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	}
	return FailNotPVA
}
