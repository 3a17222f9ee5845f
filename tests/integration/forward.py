"""forward.py - a TCP port mapping, as NAT or a container runtime makes one:
accepts on 127.0.0.1:LISTEN and relays every connection to TARGET
(HOST:PORT) both ways. Writes "ready" to READY once listening, and the
bytes relayed to COUNT at SIGTERM (tests/integration/advertise.sh).

    python3 forward.py LISTEN TARGET READY COUNT
"""
import signal
import socket
import sys
import threading

listen, target, ready, count = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
host, port = target.rsplit(":", 1)
relayed = [0]
lock = threading.Lock()


def pump(a, b):
    try:
        while True:
            d = a.recv(1 << 16)
            if not d:
                break
            b.sendall(d)
            with lock:
                relayed[0] += len(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_WR if s is b else socket.SHUT_RD)
        except OSError:
            pass


def serve(c):
    try:
        u = socket.create_connection((host, int(port)), timeout=10)
        u.settimeout(None)
    except OSError:
        c.close()
        return
    for a, b in ((c, u), (u, c)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()


def stop(*_):
    with open(count, "w") as f:
        f.write("%d\n" % relayed[0])
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", listen))
s.listen(64)
open(ready, "w").write("ready\n")
while True:
    c, _ = s.accept()
    serve(c)
