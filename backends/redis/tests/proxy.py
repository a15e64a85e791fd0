#!/usr/bin/env python3
"""A TCP relay to a Redis server that loses replies: on the first
connection it forwards every request but only the first CUT bytes of
replies, then closes both sides.  Later connections are relayed whole; with
"gone", the proxy stops listening after the first connection instead, so
every later one is refused (a server lost for good).
Usage: proxy.py LISTEN_PORT UPSTREAM_PORT CUT READY_FILE [gone]   (exits after 120 s)"""
import socket
import sys
import threading
import time

listen, upstream, cut = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
gone = len(sys.argv) > 5 and sys.argv[5] == "gone"
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen))
srv.listen(16)
open(sys.argv[4], "w").close()
first = [True]


def pump(a, b, limit, done):
    sent = 0
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            if limit is not None and sent + len(data) > limit:
                b.sendall(data[: limit - sent])
                time.sleep(0.2)  # let the server run every request
                break
            b.sendall(data)
            sent += len(data)
    except OSError:
        pass
    done.set()


def serve(c, limit):
    u = socket.create_connection(("127.0.0.1", upstream))
    done = threading.Event()
    threading.Thread(target=pump, args=(c, u, None, done), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, limit, done), daemon=True).start()
    done.wait()
    for s in (c, u):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


srv.settimeout(1.0)
end = time.time() + 120
while time.time() < end:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    limit = None
    if first[0]:
        first[0] = False
        limit = cut
    t = threading.Thread(target=serve, args=(c, limit), daemon=True)
    t.start()
    if gone:
        srv.close()
        t.join(timeout=end - time.time())
        break
