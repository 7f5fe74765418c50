#!/usr/bin/env python3
"""udp_order.py - send numbered UDP datagrams from one network namespace to
another and report, per datagram received, its number and one-way delay.

Usage: udp_order.py FROM_NS TO_NS TO_ADDR PORT COUNT SPACING_US [LENGTH]
  FROM_NS, TO_NS  names under /run/netns (as `ip netns`)
  TO_ADDR, PORT   the receiver's IPv4 address (in TO_NS) and port
  COUNT           datagrams to send, numbered 0..COUNT-1
  SPACING_US      their spacing on an absolute schedule (0: back to back)
  LENGTH          payload bytes (default 64, at least 16)

One process and one thread hold both sockets (each made inside its
namespace through setns(2), then used from the original one), so both ends
read the same clock: the payload carries the sender's CLOCK_REALTIME just
before sendto, the receiver takes the kernel's receive timestamp
(SO_TIMESTAMPNS, the same clock). Between sends the receiver is drained;
after the last send it drains until 1 s passes without a datagram.

Prints one JSON object: {"sent": COUNT, "send_ns": [the send times],
"recv": [[number, delay_ns], ...] in the order they arrived}.
"""
import ctypes
import json
import os
import select
import socket
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
SO_RCVBUFFORCE = 33
libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "setns: " + os.strerror(err))


def socket_in(ns, home):
    fd = os.open("/run/netns/" + ns, os.O_RDONLY)
    try:
        setns(fd)
        return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    finally:
        os.close(fd)
        setns(home)


def main():
    if len(sys.argv) not in (7, 8):
        sys.exit(__doc__)
    from_ns, to_ns, addr = sys.argv[1:4]
    port, count, spacing_us = (int(v) for v in sys.argv[4:7])
    length = int(sys.argv[7]) if len(sys.argv) == 8 else 64
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    rx = socket_in(to_ns, home)
    rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    # beyond rmem_max (root): a stalled guest must not overflow it
    rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    rx.bind((addr, port))
    rx.setblocking(False)
    tx = socket_in(from_ns, home)
    tx.connect((addr, port))
    pad = b"\0" * (max(length, 16) - 16)
    recv, send_ns = [], []

    def drain():
        got = 0
        while True:
            try:
                data, anc, _, _ = rx.recvmsg(length + 64, socket.CMSG_SPACE(16))
            except BlockingIOError:
                return got
            seq, sent = struct.unpack_from("!QQ", data)
            ts = None
            for level, kind, val in anc:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
                    s, ns = struct.unpack("qq", val[:16])
                    ts = s * 1000000000 + ns
            if ts is None:
                ts = time.time_ns()
            recv.append([seq, ts - sent])
            got += 1

    start = time.monotonic_ns()
    for i in range(count):
        due = start + i * spacing_us * 1000
        while True:
            drain()
            left = due - time.monotonic_ns()
            if left <= 0:
                break
            select.select([rx], [], [], left / 1e9)
        now = time.time_ns()
        send_ns.append(now)
        tx.send(struct.pack("!QQ", i, now) + pad)
    quiet_since = time.monotonic_ns()
    while time.monotonic_ns() - quiet_since < 1000000000:
        select.select([rx], [], [], 0.1)
        if drain():
            quiet_since = time.monotonic_ns()
    json.dump({"sent": count, "send_ns": send_ns, "recv": recv}, sys.stdout)


if __name__ == "__main__":
    main()
