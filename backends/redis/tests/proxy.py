#!/usr/bin/env python3
"""A TCP relay to a Redis server that loses replies: on the first
connection it forwards every request but only the first CUT bytes of
replies, then closes both sides.  Later connections are relayed whole; with
"gone", the proxy stops listening after the first connection instead, so
every later one is refused (a server lost for good).
With "after=TOKEN" the cut waits for a command: every connection is
relayed whole until a client sends a request containing TOKEN (a command
name such as CF.DEL, case-sensitive); from then on that connection's
replies are forwarded for CUT more bytes only, then both sides are closed
(once: later connections are relayed whole).  So the cut lands in the
replies of the command under test, whatever the client sent before it.
READY_FILE.cut is created when replies are cut.
Usage: proxy.py LISTEN_PORT UPSTREAM_PORT CUT READY_FILE [gone] [after=TOKEN]
(exits after 120 s)"""
import socket
import sys
import threading
import time

listen, upstream, cut = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[5:]
gone = "gone" in extra
token = None
for a in extra:
    if a.startswith("after="):
        token = a[len("after="):].encode()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen))
srv.listen(16)
open(sys.argv[4], "w").close()
first = [True]
lock = threading.Lock()
fired = [False]  # with a token: the cut happened (or is under way)


class Conn:
    def __init__(self, limit):
        self.limit = limit  # reply bytes allowed in all, None = no limit
        self.sent = 0       # reply bytes forwarded so far
        self.tail = b""     # the last bytes of requests, for a token split across reads


def requests(a, b, conn, done):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            if token is not None and conn.limit is None:
                seen = conn.tail + data
                with lock:
                    if token in seen and not fired[0]:
                        fired[0] = True
                        conn.limit = conn.sent + cut
                conn.tail = seen[-len(token):]
            b.sendall(data)
    except OSError:
        pass
    done.set()


def replies(a, b, conn, done):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            limit = conn.limit
            if limit is not None and conn.sent + len(data) > limit:
                b.sendall(data[: max(0, limit - conn.sent)])
                open(sys.argv[4] + ".cut", "w").close()  # a reply was lost
                time.sleep(0.2)  # let the server run every request
                break
            b.sendall(data)
            conn.sent += len(data)
    except OSError:
        pass
    done.set()


def serve(c, limit):
    u = socket.create_connection(("127.0.0.1", upstream))
    conn = Conn(limit)
    done = threading.Event()
    threading.Thread(target=requests, args=(c, u, conn, done), daemon=True).start()
    threading.Thread(target=replies, args=(u, c, conn, done), daemon=True).start()
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
    if first[0] and token is None:
        first[0] = False
        limit = cut
    t = threading.Thread(target=serve, args=(c, limit), daemon=True)
    t.start()
    if gone:
        srv.close()
        t.join(timeout=end - time.time())
        break
