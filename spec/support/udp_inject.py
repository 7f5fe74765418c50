#!/usr/bin/env python3
"""udp_inject.py - forge UDP datagrams into a running test on 127.0.0.1.

Usage: udp_inject.py PORT TO KIND...
  PORT  the server's port (its UDP data socket is bound there and connected
        to the client's socket)
  TO    "server" (forged from the client's address and port) or "client"
        (forged from the server's)
  KIND  "runt:N" (N bytes of zeros), or "dgram:SEQ:SEQBITS:LEN" (an
        iperf3-layout header with sequence number SEQ in 32 or 64 bits,
        then zeros: a wrong test tag where the test tags its datagrams)

A connected UDP socket only takes datagrams from its peer's address and
port, so the datagrams are written through a raw IPv4 socket (root) with
that 5-tuple. Prints the source and destination ports and how many were sent.
"""
import socket
import struct
import sys
import time


def established(port):
    """(client_port, server_port) of an established UDP pair on port."""
    for path in ("/proc/net/udp",):
        with open(path) as f:
            next(f)
            for line in f:
                cols = line.split()
                la, lp = cols[1].split(":")
                ra, rp = cols[2].split(":")
                if cols[3] != "01":
                    continue
                if int(rp, 16) == port and int(lp, 16) != port and la == "0100007F":
                    return int(lp, 16), port
    return None


def packet(src_port, dst_port, payload):
    src = dst = socket.inet_aton("127.0.0.1")
    udp = struct.pack("!HHHH", src_port, dst_port, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x4242, 0, 64,
                     socket.IPPROTO_UDP, 0, src, dst)
    return ip + udp


def payload(kind):
    parts = kind.split(":")
    if parts[0] == "runt":
        return bytes(int(parts[1]))
    if parts[0] == "dgram":
        seq, bits, length = int(parts[1]), int(parts[2]), int(parts[3])
        now = time.time()
        hdr = struct.pack("!II", int(now), int((now % 1) * 1e6))
        hdr += struct.pack("!Q", seq) if bits == 64 else struct.pack("!I", seq)
        return hdr + bytes(max(0, length - len(hdr)))
    raise SystemExit("unknown kind " + kind)


def main():
    port, to = int(sys.argv[1]), sys.argv[2]
    pair = None
    deadline = time.monotonic() + 5
    while pair is None and time.monotonic() < deadline:
        pair = established(port)
        if pair is None:
            time.sleep(0.05)
    if pair is None:
        raise SystemExit("no established UDP socket towards port %d" % port)
    cport, sport = pair
    src, dst = (cport, sport) if to == "server" else (sport, cport)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    n = 0
    for kind in sys.argv[3:]:
        s.sendto(packet(src, dst, payload(kind)), ("127.0.0.1", 0))
        n += 1
    print("from %d to %d sent %d" % (src, dst, n))


if __name__ == "__main__":
    main()
