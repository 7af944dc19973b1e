"""Declaring an application's intent for a socket to the sluice agent (docs/platform.md).

Standard library only and no privilege needed: the declaration is a setsockopt() at a level of
sluice's own, which the agent's BPF program takes. This file may be copied into an application
as it is. The agent's policy maps each intent to a class. It also says which cgroups may claim
which intent.

    s = socket.socket()
    try:
        intent.declare(s, "latency_sensitive")
    except PermissionError:
        pass  # this cgroup may not claim it: the connection gets its ordinary class
    s.connect(...)

Declare before connect() or listen(). ``target_rate`` (bits per second) also paces the socket.
PermissionError: the policy does not map the intent, the caller's cgroup may not claim it, or
the socket is already connected; OSError with ENOPROTOOPT: no agent runs on the host.
"""

import socket
import struct

SOL_SLUICE = 0x534C
"""The socket option level the agent takes ("SL")."""
SLUICE_INTENT = 1
"""Its one option."""

INTENTS = {"latency_sensitive": 1, "bulk": 2, "target_rate": 3, "deadline": 4}
"""Each intent's number, as ``sluice/intent.h`` numbers them."""


def declare(sock: socket.socket, intent: str, value: int = 0) -> None:
    """Declares ``intent`` for ``sock``; ``value`` is the rate in bits per second for
    ``target_rate`` and the microseconds from now for ``deadline``."""
    if intent not in INTENTS:
        raise ValueError(f"unknown intent {intent!r}; expected one of {', '.join(INTENTS)}")
    if not 0 <= value < 1 << 64:
        raise ValueError(f"value {value}: expected 0 to 2^64 - 1")
    sock.setsockopt(SOL_SLUICE, SLUICE_INTENT, struct.pack("=IIQ", INTENTS[intent], 0, value))
