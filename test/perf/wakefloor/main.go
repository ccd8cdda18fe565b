// Command wakefloor is the cheapest Go receiver of search datagrams: it
// binds a UDP port and reads every datagram with a raw recvfrom through the
// netpoller, and does nothing else. At a low datagram rate its CPU per
// datagram is what the Go runtime's wake-up costs on the machine, a floor
// under any Go daemon's figure (docs/PERFORMANCE.md, "One pass per
// datagram"); floor.c beside it is the same loop in C on epoll, the floor
// under PVXS's. TestThroughput runs both with PERF_FLOORS=1.
package main

import (
	"log"
	"net"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatalf("usage: %s PORT (binds 127.0.0.1:PORT)", os.Args[0])
	}
	port, err := strconv.ParseUint(os.Args[1], 10, 16)
	if err != nil {
		log.Fatal(err)
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 2048)
	// A raw system call, as pvans's receive loop makes: a plain one would
	// wake the runtime's sysmon on every datagram and measure that instead.
	read := func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		return e != syscall.EAGAIN
	}
	for {
		if err := rc.Read(read); err != nil {
			log.Fatal(err)
		}
	}
}
