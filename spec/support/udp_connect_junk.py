#!/usr/bin/env python3
"""udp_connect_junk.py PORT SRC SECONDS SOCKETS: from SOCKETS UDP sockets bound
to SRC (ephemeral ports), send bare 4-byte UDP connect messages (iperf3's magic,
no cookie) to 127.0.0.1:PORT every millisecond for SECONDS, and count the
connect replies any of them receives. Prints "sent N replies M"."""
import select
import socket
import struct
import sys
import time

port, src, seconds, count = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
socks = []
for _ in range(count):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((src, 0))
    u.setblocking(False)
    socks.append(u)
msg = struct.pack('<I', 0x36373839)
sent = replies = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    for u in socks:
        try:
            u.sendto(msg, ('127.0.0.1', port))
            sent += 1
        except OSError:
            pass
    r, _, _ = select.select(socks, [], [], 0.001)
    for u in r:
        try:
            while True:
                u.recv(64)
                replies += 1
        except OSError:
            pass
print('sent %d replies %d' % (sent, replies), flush=True)
