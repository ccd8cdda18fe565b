#!/bin/bash
# Records the golden capture of Phoebus core-pva ("org.epics.pva", the Java
# PVAccess library of CS-Studio and the Archiver Appliance) that the
# wire-format tests decode (internal/pva/testdata/captures/java.txt): the
# Java client's searches over UDP and over TCP to a name server, and the Java
# server's replies, including to searches with a negative CID and to a
# CREATE_CHANNEL for the `server` PV it does not have. Peers talk over the
# loopback of a private network namespace that this script creates and
# deletes; tcpdump records, scripts/render-capture.py renders.
#
# It runs core-pva built elsewhere; it never builds or fetches it. Give in
# the environment:
#   COREPVA_CP  Java class path holding core-pva's classes (javac over
#               phoebus core/pva/src/main/java, with its resources) and
#               bouncycastle (bcprov, bcpkix, bcutil)
# Optional: JAVA (default java), OUT (default
# internal/pva/testdata/captures), NAME (default java), PACE seconds between
# steps (default 3: a JVM takes a second or more to start).
#
# The negative-CID searches and the `server` CREATE_CHANNEL come from a small
# crafted client below (Python): no real client sends them, pvans does.
#
# Must run as root (namespace, tcpdump). Nothing leaves the namespace: its
# only interface is lo, and every peer gets loopback-only EPICS settings.
set -euo pipefail

: "${COREPVA_CP:?class path of core-pva classes and bouncycastle jars}"
JAVA=${JAVA:-java}
command -v "$JAVA" >/dev/null || { echo "java missing (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
command -v tcpdump >/dev/null || { echo "tcpdump missing (apt-get install tcpdump)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing" >&2; exit 1; }
"$JAVA" -cp "$COREPVA_CP" org.epics.pva.client.PVAClientMain -h >/dev/null 2>&1 ||
	{ echo "core-pva not found in COREPVA_CP" >&2; exit 1; }

OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/internal/pva/testdata/captures}
NAME=${NAME:-java}
PACE=${PACE:-3}
export OUT NAME PACE JAVA COREPVA_CP

# Outer run: make the namespace, run this script again inside it, delete it.
if [ -z "${RECORD_CAPTURES_NS:-}" ]; then
	NS=pvans-capture-$$
	trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
	ip netns add "$NS"
	ip netns exec "$NS" ip link set lo up
	mkdir -p "$OUT"
	RECORD_CAPTURES_NS=$NS ip netns exec "$NS" unshare --uts "$0" "$@"
	exit
fi

# Inner run: every peer is a direct child, stopped by its PID. The host
# name is a fixed one that resolves (core-pva's client looks it up for its
# validation, and waits seconds for a name that does not): /etc/hosts is
# replaced in this run's own mount namespace (ip netns exec made one).
hostname capture
LOG=$(mktemp -d)
printf '127.0.0.1 localhost capture\n' >"$LOG/hosts"
mount --bind "$LOG/hosts" /etc/hosts
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.5
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Loopback only, IPv4 only (core-pva would also open [::] and join
# multicast groups by default).
export EPICS_PVA_AUTO_ADDR_LIST=NO EPICS_PVA_ADDR_LIST=127.0.0.1 EPICS_PVAS_INTF_ADDR_LIST=127.0.0.1
export EPICS_PVA_ENABLE_IPV6=false EPICS_PVA_BROADCAST_PORT=5076 EPICS_PVAS_BROADCAST_PORT=5076
export EPICS_PVA_SERVER_PORT=5075
unset EPICS_PVA_NAME_SERVERS EPICS_PVAS_TLS_KEYCHAIN EPICS_PVA_TLS_KEYCHAIN

start() { # log-name command...
	local name=$1
	shift
	"$@" >"$LOG/$name.log" 2>&1 &
	LAST=$!
	PIDS+=("$LAST")
}
step() { # what, then a client command run to completion
	echo "== $1" | tee -a "$LOG/clients.log"
	shift
	timeout 60 "$@" >>"$LOG/clients.log" 2>&1 || echo "(exit $?)" >>"$LOG/clients.log"
	sleep "$PACE"
}
stop() {
	kill "$1"
	wait "$1" 2>/dev/null || true
}

PCAP=$OUT/$NAME.pcap
rm -f "$PCAP"
start tcpdump tcpdump -i lo -n -Z root -s 0 -U -w "$PCAP" 'ip and (udp or tcp)'
DUMP=$LAST
sleep 1

# core-pva's ServerDemo serves demo, demo2 (read-only) and demo3 (writable).
start server "$JAVA" -cp "$COREPVA_CP" org.epics.pva.server.ServerDemo -v 3
S=$LAST
sleep $((2 * ${PACE%.*} + 1))

CLIENT=("$JAVA" -cp "$COREPVA_CP" org.epics.pva.client.PVAClientMain -w 10)
step "Java client: get demo demo2 demo3, UDP search to 127.0.0.1:5076" "${CLIENT[@]}" get demo demo2 demo3
step "Java client: get demo demo2 demo3 through the TCP name server 127.0.0.1:5075" \
	env EPICS_PVA_NAME_SERVERS=127.0.0.1:5075 EPICS_PVA_ADDR_LIST= "${CLIENT[@]}" get demo demo2 demo3

cat >"$LOG/craft.py" <<'EOF'
# Searches with negative CIDs (as int32) and CREATE_CHANNEL "server".
import socket, struct, sys, time

def pstr(s):
    return bytes([len(s)]) + s.encode()

def header(cmd, flags, n, le):
    return struct.pack("<BBBBI" if le else ">BBBBI", 0xCA, 2, flags | (0 if le else 0x80), cmd, n)

def search(seq, cids, port, le):
    o = "<" if le else ">"
    p = struct.pack(o + "I", seq) + bytes(4) + bytes(16) + struct.pack(o + "H", port)
    p += b"\x01" + pstr("tcp") + struct.pack(o + "H", len(cids))
    for cid, name in cids:
        p += struct.pack(o + "I", cid) + pstr(name)
    return header(3, 0, len(p), le) + p

def drain(s, t):
    s.settimeout(t)
    try:
        while s.recv(65536):
            pass
    except socket.timeout:
        pass

if sys.argv[1] == "udp":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    port = u.getsockname()[1]
    # big endian: "demo" with CID 0x80000001 (negative), "demo2" with CID 2
    u.sendto(search(0x10, [(0x80000001, "demo"), (2, "demo2")], port, False), ("127.0.0.1", 5076))
    drain(u, 1.0)
    # little endian: "demo" with CID 0xFFFFFFF0 (negative)
    u.sendto(search(0x11, [(0xFFFFFFF0, "demo")], port, True), ("127.0.0.1", 5076))
    drain(u, 1.0)
else:
    t = socket.create_connection(("127.0.0.1", 5075))
    drain(t, 1.0)  # SET_BYTE_ORDER + CONNECTION_VALIDATION
    p = struct.pack("<IHH", 16384, 0x7FFF, 0) + pstr("anonymous") + b"\xff"
    t.sendall(header(1, 0, len(p), True) + p)
    drain(t, 1.0)  # CONNECTION_VALIDATED
    # search over TCP, little endian: "demo" CID 0x80000003 (negative), "demo3" CID 4
    t.sendall(search(0x20, [(0x80000003, "demo"), (4, "demo3")], 0, True))
    drain(t, 1.0)
    # CREATE_CHANNEL "server" (pvans's probe asks for it), CID 5
    p = struct.pack("<HI", 1, 5) + pstr("server")
    t.sendall(header(7, 0, len(p), True) + p)
    drain(t, 2.0)
    t.close()
EOF
step "crafted UDP searches with negative CIDs" python3 "$LOG/craft.py" udp
step "crafted TCP: validation, search with a negative CID, CREATE_CHANNEL server" python3 "$LOG/craft.py" tcp

stop "$S"
sleep 1
stop "$DUMP" # tcpdump: flushes and closes the file

python3 "$(dirname "$0")/render-capture.py" "$PCAP" >"$OUT/$NAME.txt"

echo "wrote $PCAP and $OUT/$NAME.txt ($(grep -c '^#' "$OUT/$NAME.txt") blocks); peer logs in $LOG"
