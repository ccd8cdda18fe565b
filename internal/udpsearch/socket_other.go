//go:build !linux

package udpsearch

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
)

// The search port needs IP_PKTINFO, SO_REUSEPORT and recvmmsg as Linux
// has them; elsewhere Listen fails and only the handler (tests, fuzzing) works.

func listenSearchPort(uint16, int) (*net.UDPConn, error) { return nil, errors.ErrUnsupported }
func listenEphemeral(uint16, int) (*net.UDPConn, error)  { return nil, errors.ErrUnsupported }

type rxBatch struct{}

func newRxBatch(int, int) *rxBatch                        { return &rxBatch{} }
func (*rxBatch) recv(syscall.RawConn) (int, error)        { return 0, net.ErrClosed }
func (*rxBatch) fill(int, *datagram, *uint32, *bool) bool { return false }

type sockSender struct {
	fwd *net.UDPConn
	tx  *txBatch
	fw  *rawWriter
}

func newSockSender(*net.UDPConn, *net.UDPConn, *counters, uint16) *sockSender { return &sockSender{} }
func listenSearchPort6(uint16, int) (*net.UDPConn, error)                     { return nil, errors.ErrUnsupported }
func listenEphemeral6(uint16, int) (*net.UDPConn, error)                      { return nil, errors.ErrUnsupported }
func (*sockSender) reply([]byte, netip.AddrPort, netip.Addr, int)             {}
func (*sockSender) forward([]byte)                                            {}

func prepMulticast(*net.UDPConn, *sendDest) error { return errors.ErrUnsupported }

func setReceiveBuffer(*net.UDPConn, int) error { return errors.ErrUnsupported }

func listenForwarder(uint16) (*net.UDPConn, error) { return nil, errors.ErrUnsupported }
func socketInode(*net.UDPConn) (uint64, error)     { return 0, errors.ErrUnsupported }

type sockDiag struct{}

func openSockDiag() (*sockDiag, error)                             { return nil, errors.ErrUnsupported }
func (*sockDiag) close() error                                     { return nil }
func (*sockDiag) otherSocketsOnPort(uint16, []uint64) (int, error) { return 0, errors.ErrUnsupported }

func joinGroup(*net.UDPConn, *sendDest) error { return errors.ErrUnsupported }

type txBatch struct{}

func newTxBatch(*net.UDPConn, *counters) (*txBatch, error) { return nil, errors.ErrUnsupported }
func (*sockSender) flush()                                 {}

type rawWriter struct{}

func newRawWriter(*net.UDPConn) (*rawWriter, error) { return nil, errors.ErrUnsupported }
func (*rawWriter) send([]byte) error                { return errors.ErrUnsupported }
