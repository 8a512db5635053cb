"""A port for a server that must know it before it binds: another process, or a URL written first.

Binding port 0 and closing the socket hands back a port from the kernel's ephemeral range, and any
outgoing connection on the machine may take that port as its local end before the server binds it
("Address already in use"). So ports come from below the ephemeral range, where only an explicit
bind takes one, and each is checked free and handed out once per test process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_BELOW = 10_000  # how many ports under the ephemeral range to choose from
_handed_out: set[int] = set()
_random = random.Random()  # its own generator: tests that seed `random` must not repeat our choices


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nobody listens on and that this process has not handed out before."""
    top = _ephemeral_start()
    for _ in range(1000):
        port = _random.randrange(max(1024, top - _BELOW), top)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port found in {max(1024, top - _BELOW)}-{top - 1}")
