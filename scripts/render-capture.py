#!/usr/bin/env python3
# Renders a pcap (Ethernet or Linux cooked, IPv4) as one block per UDP
# datagram or TCP segment payload:
#   #n t=+S.UUUUUU UDP|TCP src -> dst len=N
#     0000  ca 02 ...  ascii
import struct, sys

data = open(sys.argv[1], "rb").read()
magic = data[:4]
if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
    e = "<"
elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
    e = ">"
else:
    sys.exit("not a pcap file")
nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
link = struct.unpack(e + "I", data[20:24])[0]
linkhdr = {1: 14, 113: 16}.get(link)
if linkhdr is None:
    sys.exit("unsupported link type %d" % link)
off, n, t0 = 24, 0, None
while off + 16 <= len(data):
    sec, frac, incl, _ = struct.unpack(e + "IIII", data[off:off + 16])
    pkt = data[off + 16:off + 16 + incl]
    off += 16 + incl
    t = sec + frac / (1e9 if nano else 1e6)
    ip = pkt[linkhdr:]
    if len(ip) < 20 or ip[0] >> 4 != 4:
        continue
    ihl = (ip[0] & 15) * 4
    total = struct.unpack(">H", ip[2:4])[0]
    proto = ip[9]
    src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
    l4 = ip[ihl:total]
    if proto == 17:
        sp, dp = struct.unpack(">HH", l4[:4])
        kind, payload = "UDP", l4[8:]
    elif proto == 6:
        sp, dp = struct.unpack(">HH", l4[:4])
        kind, payload = "TCP", l4[(l4[12] >> 4) * 4:]
    else:
        continue
    if not payload:
        continue
    if t0 is None:
        t0 = t
    n += 1
    print("#%d t=+%.6f %s %s:%d -> %s:%d len=%d" % (n, t - t0, kind, src, sp, dst, dp, len(payload)))
    for i in range(0, len(payload), 16):
        row = payload[i:i + 16]
        hexs = " ".join("%02x" % b for b in row)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        print("  %04x  %-47s  %s" % (i, hexs, asc))
    print()
