#!/usr/bin/env python3
"""Hostile peers of an iperf3-protocol server, for the hardened-server specs.

Every mode binds its connections to --src (a loopback address, so one
"address" can be told from another), runs at most --seconds and then
prints one JSON line with what it saw. Modes:

  flood    keep --count silent TCP connections open (no cookie ever)
           from each --src (a comma-separated list of addresses); each
           one the server closes is opened again at once.
  slowlegit  --count clients one after another, each waiting --gap s
           before its cookie and again before its parameters (a client
           far away); success = CREATE_STREAMS received.
  hold     keep --count clients that send a cookie and parameters for a
           long test (--time), then send nothing (--no-params: fall silent
           right after PARAM_EXCHANGE instead); --streams also opens the
           data connection (with the cookie) before falling silent. A
           client the server refuses or ends is started again (not with
           --once: then the mode ends when its clients are gone).
  results  run one real 1 s TCP test and answer EXCHANGE_RESULTS with a
           hostile results message: --entries empty {} entries in one
           interval (about 3 bytes each), framed as the protocol wants.
"""
import argparse
import json
import random
import selectors
import socket
import struct
import time

PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING = 9, 10, 1, 2
TEST_END, EXCHANGE_RESULTS, SERVER_TERMINATE = 4, 13, 11
ACCESS_DENIED, SERVER_ERROR = -1, -2
ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567'


def cookie():
    return (''.join(random.choice(ALPHABET) for _ in range(36)) + '\0').encode()


def connect(src, port, blocking=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((src, 0))
    if blocking:
        s.settimeout(5)
        s.connect(('127.0.0.1', port))
    else:
        s.setblocking(False)
        s.connect_ex(('127.0.0.1', port))
    return s


def framed(obj):
    b = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack('>I', len(b)) + b


def params(time_s):
    return {'tcp': True, 'omit': 0, 'time': time_s, 'num': 0, 'blockcount': 0,
            'parallel': 1, 'len': 131072, 'pacing_timer': 1000, 'client_version': '3.12'}


def flood(a):
    sel = selectors.DefaultSelector()
    opened = dropped = failed = 0
    end = time.monotonic() + a.seconds

    srcs = a.src.split(',')

    def one(src):
        nonlocal opened, failed
        try:
            s = connect(src, a.port, blocking=False)
        except OSError:
            failed += 1
            return
        sel.register(s, selectors.EVENT_READ, src)
        opened += 1

    for _ in range(a.count):
        for src in srcs:
            one(src)
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b''
            if not data:
                sel.unregister(s)
                s.close()
                dropped += 1
                if time.monotonic() < end:
                    one(key.data)
    live = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print(json.dumps({'mode': 'flood', 'opened': opened, 'dropped': dropped,
                      'failed': failed, 'open_at_end': live}), flush=True)


def hold(a):
    """Each client: a small state machine on a non-blocking control socket."""
    sel = selectors.DefaultSelector()
    stats = {'mode': 'hold', 'started': 0, 'admitted': 0, 'refused': 0, 'ended': 0,
             'closed': 0, 'reasons': {}}
    end = time.monotonic() + a.seconds
    data_socks = []

    def start():
        # up to the parameters at once, as a real client does (a slow
        # hostile client is just an unidentified connection)
        try:
            s = connect(a.src, a.port)
            ck = cookie()
            s.sendall(ck)
            b = s.recv(1)
            if b and struct.unpack('b', b)[0] == PARAM_EXCHANGE:
                if not a.no_params:
                    s.sendall(framed(params(a.time)))
                b = b''
            s.setblocking(False)
        except OSError:
            stats['closed'] += 1
            return
        stats['started'] += 1
        sel.register(s, selectors.EVENT_READ, {'cookie': ck, 'buf': b})

    def drop(s, what, reason=None):
        sel.unregister(s)
        s.close()
        stats[what] += 1
        if reason:
            stats['reasons'][reason] = stats['reasons'].get(reason, 0) + 1
        if time.monotonic() < end and not a.once:
            time.sleep(0.02)
            start()

    for _ in range(a.count):
        start()
    while time.monotonic() < end and (sel.get_map() or not a.once):
        for key, _ in sel.select(timeout=0.05):
            s, st = key.fileobj, key.data
            try:
                b = s.recv(4096)
            except OSError:
                b = b''
            if not b:
                drop(s, 'closed')
                continue
            st['buf'] += b
            while st['buf']:
                state = struct.unpack('b', st['buf'][:1])[0]
                if state == PARAM_EXCHANGE:
                    st['buf'] = st['buf'][1:]
                    s.setblocking(True)
                    s.sendall(framed(params(a.time)))
                    s.setblocking(False)
                elif state == CREATE_STREAMS:
                    st['buf'] = st['buf'][1:]
                    stats['admitted'] += 1
                    if a.streams:
                        try:
                            d = connect(a.src, a.port)
                            d.sendall(st['cookie'])
                            data_socks.append(d)
                        except OSError:
                            pass
                elif state in (ACCESS_DENIED, SERVER_ERROR, SERVER_TERMINATE):
                    # state [+ 8 bytes] + the length-prefixed reason, which
                    # may come in a later segment
                    skip = 9 if state == SERVER_ERROR else 1
                    s.setblocking(True)
                    s.settimeout(1)
                    try:
                        while len(st['buf']) < skip + 4 or len(st['buf']) < skip + 4 + \
                                struct.unpack('>I', st['buf'][skip:skip + 4])[0]:
                            more = s.recv(4096)
                            if not more:
                                break
                            st['buf'] += more
                    except OSError:
                        pass
                    rest = st['buf'][skip:]
                    reason = None
                    if len(rest) >= 4:
                        n = struct.unpack('>I', rest[:4])[0]
                        reason = rest[4:4 + n].decode(errors='replace')
                        reason = reason.split(': ', 1)[-1][:60]
                    st['buf'] = b''
                    drop(s, 'ended' if state == SERVER_TERMINATE else 'refused', reason)
                    break
                else:
                    st['buf'] = st['buf'][1:]   # TEST_START, TEST_RUNNING, ...
            # a dropped socket's key is gone; nothing else to do
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    for d in data_socks:
        d.close()
    print(json.dumps(stats), flush=True)


def slowlegit(a):
    ok, seen = 0, {}
    end = time.monotonic() + a.seconds
    for _ in range(a.count):
        if time.monotonic() > end:
            break
        b = None
        try:
            s = connect(a.src, a.port)
            time.sleep(a.gap)
            s.sendall(cookie())
            b = recv_state(s)
            if b == PARAM_EXCHANGE:
                time.sleep(a.gap)
                s.sendall(framed(params(1)))
                b = recv_state(s)
            s.close()
        except OSError as e:
            b = type(e).__name__
        seen[str(b)] = seen.get(str(b), 0) + 1
        ok += b == CREATE_STREAMS
    print(json.dumps({'mode': 'slowlegit', 'ok': ok, 'tried': sum(seen.values()),
                      'states': seen}), flush=True)


def recv_state(s):
    b = s.recv(1)
    if not b:
        raise ConnectionError('server closed')
    return struct.unpack('b', b)[0]


def results(a):
    out = {'mode': 'results'}
    s = connect(a.src, a.port)
    s.settimeout(10)
    ck = cookie()
    s.sendall(ck)
    data = None
    try:
        while True:
            st = recv_state(s)
            if st == PARAM_EXCHANGE:
                p = params(1)
                p['len'] = 65536
                s.sendall(framed(p))
            elif st == CREATE_STREAMS:
                data = connect(a.src, a.port)
                data.sendall(ck)
            elif st == TEST_START:
                pass
            elif st == TEST_RUNNING:
                t0 = time.monotonic()
                buf = b'\0' * 65536
                while time.monotonic() - t0 < 1:
                    data.sendall(buf)
                s.sendall(struct.pack('b', TEST_END))
            elif st == EXCHANGE_RESULTS:
                entries = ','.join(['{}'] * a.entries)
                msg = ('{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,'
                       '"sender_has_retransmits":0,"streams":[{"id":1,"bytes":0,'
                       '"retransmits":0,"jitter":0,"errors":0,"packets":0}],'
                       '"qoslab":{"intervals":[{"start_s":0,"end_s":1,"entries":['
                       + entries + ']}]}}').encode()
                out['message_bytes'] = len(msg)
                t0 = time.monotonic()
                try:
                    s.sendall(framed(msg))
                    rest = s.recv(1)
                    out['reply'] = struct.unpack('b', rest)[0] if rest else 'closed'
                except OSError as e:
                    out['reply'] = 'error: ' + e.strerror if e.strerror else 'error'
                out['reply_s'] = round(time.monotonic() - t0, 3)
                break
            elif st in (ACCESS_DENIED, SERVER_ERROR, SERVER_TERMINATE):
                out['reply'] = st
                break
    except (OSError, ConnectionError) as e:
        out['error'] = str(e)
    finally:
        s.close()
        if data:
            data.close()
    print(json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('mode', choices=['flood', 'hold', 'results', 'slowlegit'])
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--src', default='127.0.0.2')
    ap.add_argument('--count', type=int, default=1)
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--time', type=float, default=3000)
    ap.add_argument('--streams', action='store_true')
    ap.add_argument('--once', action='store_true', help='hold: do not start again')
    ap.add_argument('--no-params', action='store_true',
                    help='hold: fall silent after PARAM_EXCHANGE, sending no parameters')
    ap.add_argument('--entries', type=int, default=1000)
    ap.add_argument('--gap', type=float, default=0.5, help='slowlegit: seconds between steps')
    a = ap.parse_args()
    a.seconds = min(a.seconds, 120)   # every hostile peer is bounded in time
    a.count = min(a.count, 2000)
    {'flood': flood, 'hold': hold, 'results': results, 'slowlegit': slowlegit}[a.mode](a)


if __name__ == '__main__':
    main()
