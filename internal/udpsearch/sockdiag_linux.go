//go:build linux

package udpsearch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// sock_diag (linux/inet_diag.h) values x/sys/unix does not carry.
const (
	inetDiagReqBytecode = 1 // INET_DIAG_REQ_BYTECODE
	inetDiagBcSGE       = 2 // INET_DIAG_BC_S_GE
	inetDiagBcSLE       = 3 // INET_DIAG_BC_S_LE
	sizeofInetDiagReqV2 = 56
	sizeofInetDiagMsg   = 72
	inetDiagMsgSport    = 4  // offset of idiag_sport (big-endian)
	inetDiagMsgInode    = 68 // offset of idiag_inode
)

// sockDiag is a NETLINK_SOCK_DIAG socket. It belongs to the network
// namespace of the thread that opened it, whichever thread uses it later.
type sockDiag struct {
	fd  int
	buf []byte
}

func openSockDiag() (*sockDiag, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	// A kernel that never answers must not stall the receive loop.
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &sockDiag{fd: fd, buf: make([]byte, 16384)}, nil
}

func (s *sockDiag) close() error { return unix.Close(s.fd) }

// otherSocketsOnPort counts the UDP sockets (IPv4 and IPv6) in the
// socket's network namespace bound to port whose inode is not in own. The
// kernel filters by port (a two-instruction inet_diag bytecode, sport >=
// port and sport <= port, known to every kernel with udp_diag), so the
// answer holds only the sockets sharing the search port, however many UDP
// sockets the host has. One caller at a time.
func (s *sockDiag) otherSocketsOnPort(port uint16, own []uint64) (int, error) {
	n := 0
	for i, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := sockDiagRequest(fam, port, uint32(i+1))
		if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return 0, err
		}
		k, err := readDiagDump(s.fd, s.buf, port, own)
		if err != nil {
			return 0, fmt.Errorf("sock_diag dump (family %d): %w", fam, err)
		}
		n += k
	}
	return n, nil
}

func sockDiagRequest(family uint8, port uint16, seq uint32) []byte {
	const bcLen = 16
	const attrLen = unix.SizeofRtAttr + bcLen
	total := unix.SizeofNlMsghdr + sizeofInetDiagReqV2 + attrLen
	b := make([]byte, total)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(total))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], seq)
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_UDP
	ne.PutUint32(r[4:], 0xffffffff) // every state: bound (CLOSE) and connected
	a := r[sizeofInetDiagReqV2:]
	ne.PutUint16(a[0:], attrLen)
	ne.PutUint16(a[2:], inetDiagReqBytecode)
	bc := a[unix.SizeofRtAttr:]
	// op 0: sport >= port, else jump past the end (reject); op 1: sport
	// <= port, yes runs off the end (accept), no past it (reject). The
	// compared value lives in the "no" field of the op that follows.
	bc[0], bc[1] = inetDiagBcSGE, 8
	ne.PutUint16(bc[2:], bcLen+4)
	ne.PutUint16(bc[6:], port)
	bc[8], bc[9] = inetDiagBcSLE, 8
	ne.PutUint16(bc[10:], 8+4)
	ne.PutUint16(bc[14:], port)
	return b
}

// readDiagDump reads one dump to its NLMSG_DONE and counts the sockets on
// port that are not in own.
func readDiagDump(fd int, buf []byte, port uint16, own []uint64) (int, error) {
	n := 0
	for {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return 0, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:k])
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return n, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return 0, unix.Errno(-e)
					}
				}
				return 0, errors.New("netlink error")
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(m.Data) < sizeofInetDiagMsg {
					continue
				}
				sport := binary.BigEndian.Uint16(m.Data[inetDiagMsgSport:])
				ino := uint64(binary.NativeEndian.Uint32(m.Data[inetDiagMsgInode:]))
				if sport == port && !slices.Contains(own, ino) {
					n++
				}
			}
		}
	}
}
