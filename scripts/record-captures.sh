#!/bin/bash
# Records the golden PVA capture the wire-format tests decode
# (internal/pva/testdata/captures): real PVXS and pvAccessCPP peers talking
# over the loopback of a private network namespace that this script creates
# and deletes, captured with tcpdump, rendered as one text block per UDP
# datagram or TCP segment payload.
#
# It runs peers built elsewhere; it never builds or fetches them. Give their
# paths in the environment:
#   PVXS_BIN        directory with pvxget and pvxlist (PVXS)
#   PVXS_MAILBOX    PVXS example/O.<arch>/mailbox
#   PVACPP_BIN      directory with pvlist (pvAccessCPP)
#   PVACPP_MAILBOX  pvAccessCPP examples/O.<arch>/mailbox
# Optional: OUT (default internal/pva/testdata/captures), NAME (default
# loopback), PACE seconds between steps (default 1.5: the first
# servers are stopped before their second beacon, 15 s after start).
#
# Must run as root (namespace, tcpdump). Nothing leaves the namespace: its
# only interface is lo, and every peer gets loopback-only EPICS settings.
set -euo pipefail

: "${PVXS_BIN:?directory of pvxget/pvxlist}" "${PVXS_MAILBOX:?PVXS mailbox example}"
: "${PVACPP_BIN:?directory of pvAccessCPP pvlist}" "${PVACPP_MAILBOX:?pvAccessCPP mailbox example}"
for x in "$PVXS_BIN/pvxget" "$PVXS_BIN/pvxlist" "$PVXS_MAILBOX" "$PVACPP_BIN/pvlist" "$PVACPP_MAILBOX"; do
	[ -x "$x" ] || { echo "not executable: $x" >&2; exit 1; }
done
command -v tcpdump >/dev/null || { echo "tcpdump missing (apt-get install tcpdump)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing" >&2; exit 1; }

OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/internal/pva/testdata/captures}
NAME=${NAME:-loopback}
PACE=${PACE:-1.5}
export OUT NAME PACE

# Outer run: make the namespace, run this script again inside it (and in a
# private UTS namespace, so the host name pvAccessCPP's client sends in its
# validation is a fixed one, not this machine's), delete the namespace.
if [ -z "${RECORD_CAPTURES_NS:-}" ]; then
	NS=pvans-capture-$$
	trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
	ip netns add "$NS"
	ip netns exec "$NS" ip link set lo up
	ip netns exec "$NS" ip link set lo multicast on
	ip netns exec "$NS" ip route add 224.0.0.0/4 dev lo
	mkdir -p "$OUT"
	RECORD_CAPTURES_NS=$NS ip netns exec "$NS" unshare --uts "$0" "$@"
	exit
fi

# Inner run: every peer is a direct child, stopped by its PID.
hostname capture
LOG=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.5
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Loopback only. The servers share UDP 5076. The PVXS servers bind 0.0.0.0,
# which in this namespace is lo alone (bound to 127.0.0.1 each also answers
# its own forwarded copy of a search); pvAccessCPP wants a named interface.
export EPICS_PVA_AUTO_ADDR_LIST=NO EPICS_PVA_ADDR_LIST=127.0.0.1
export EPICS_PVAS_INTF_ADDR_LIST=127.0.0.1 EPICS_PVAS_AUTO_BEACON_ADDR_LIST=NO EPICS_PVAS_BEACON_ADDR_LIST=127.0.0.1
export EPICS_PVA_BROADCAST_PORT=5076 EPICS_PVAS_BROADCAST_PORT=5076
unset EPICS_PVA_NAME_SERVERS EPICS_PVAS_SERVER_PORT EPICS_PVA_SERVER_PORT

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
	timeout 20 "$@" >>"$LOG/clients.log" 2>&1 || echo "(exit $?)" >>"$LOG/clients.log"
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

# B first: the server bound last gets the unicast searches (and answers them first)
start server-b env EPICS_PVAS_INTF_ADDR_LIST=0.0.0.0 EPICS_PVAS_SERVER_PORT=5085 "$PVXS_MAILBOX" cap:b:mbox3
B=$LAST
sleep 0.2
start server-a env EPICS_PVAS_INTF_ADDR_LIST=0.0.0.0 EPICS_PVAS_SERVER_PORT=5075 "$PVXS_MAILBOX" cap:a:mbox1 cap:a:mbox2
A=$LAST
sleep "$PACE"

step "pvxget: UDP search for two names, GET from A and B" "$PVXS_BIN/pvxget" -w 5 cap:b:mbox3 cap:a:mbox1
step "pvxget through the TCP name server 127.0.0.1:5075" \
	env EPICS_PVA_NAME_SERVERS=127.0.0.1:5075 EPICS_PVA_ADDR_LIST= "$PVXS_BIN/pvxget" -w 5 cap:a:mbox2
step "pvxlist: discovery ping" "$PVXS_BIN/pvxlist" -w 1
step "pvxlist 127.0.0.1:5075 (channels)" "$PVXS_BIN/pvxlist" -w 5 127.0.0.1:5075
step "pvlist 127.0.0.1:5085 (pvAccessCPP client, PVXS server B)" "$PVACPP_BIN/pvlist" -w 5 127.0.0.1:5085
step "pvxlist -i 127.0.0.1:5075 (info)" "$PVXS_BIN/pvxlist" -w 5 -i 127.0.0.1:5075

stop "$A"
stop "$B"
sleep 1
start server-c env EPICS_PVAS_SERVER_PORT=5075 "$PVACPP_MAILBOX" cap:c:mbox
C=$LAST
sleep "$PACE"
step "pvlist 127.0.0.1:5075 (pvAccessCPP both sides)" "$PVACPP_BIN/pvlist" -w 5 127.0.0.1:5075
step "pvxlist 127.0.0.1:5075 (PVXS client, pvAccessCPP server C)" "$PVXS_BIN/pvxlist" -w 5 127.0.0.1:5075
step "pvxget cap:c:mbox (PVXS client, pvAccessCPP server C)" "$PVXS_BIN/pvxget" -w 5 cap:c:mbox
stop "$C"
sleep 1
stop "$DUMP" # tcpdump: flushes and closes the file

python3 "$(dirname "$0")/render-capture.py" "$PCAP" >"$OUT/$NAME.txt"

echo "wrote $PCAP and $OUT/$NAME.txt ($(grep -c '^#' "$OUT/$NAME.txt") blocks); peer logs in $LOG"
