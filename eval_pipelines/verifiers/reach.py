"""What a verifier could not reach: the connections its sockets failed to make and the reads that timed out.

SimLab's verifiers query servers over HTTP and many catch what goes wrong themselves, returning `(False, "...
failed ...")`: a failing verdict for the agent when the truth is that the verifier learned nothing. In the
contained verifier worker (`verifiers/isolation.py`), `install()` wraps the socket calls every blocking HTTP client
goes through (`urllib`, `http.client`, `requests`, httpx's sync transport), and `verifiers.protocol.run_verifier`
turns a failure that came after such a miss into a `verifier` error. Asynchronous clients connect through the event
loop, which this does not see; their errors still count when the verifier lets them raise.

Only the worker installs it: the patch is process-wide, and the worker's process runs nothing but verifiers.
"""

from __future__ import annotations

import socket
from typing import Any

#: The misses of the verdict under way, in order: (port, description such as "127.0.0.1:9: ConnectionRefusedError").
_misses: list[tuple[Any, str]] = []
_installed = False


def _where(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _port(address: Any) -> Any:
    port = address[1] if isinstance(address, tuple) and len(address) >= 2 else address
    return int(port) if isinstance(port, str) and port.isdigit() else port


def _reached(address: Any) -> None:
    # A client tries each address a name resolves to (`localhost`: ::1, then 127.0.0.1): a refusal followed by a
    # connection to the same port elsewhere was no miss.
    _misses[:] = [(port, text) for port, text in _misses if port != _port(address)]


def install() -> None:
    """Record every failed connect, failed name lookup and timed-out read from now on (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    connect, recv_into, recv, getaddrinfo = (
        socket.socket.connect,
        socket.socket.recv_into,
        socket.socket.recv,
        socket.getaddrinfo,
    )

    def recorded_connect(self: socket.socket, address: Any) -> None:
        try:
            connect(self, address)
        except (BlockingIOError, InterruptedError):
            raise  # a non-blocking connect under way, not a miss
        except OSError as exc:
            _misses.append((_port(address), f"{_where(address)}: {type(exc).__name__}"))
            raise
        _reached(address)

    def recorded_recv_into(self: socket.socket, *args: Any, **kwargs: Any) -> int:
        try:
            return recv_into(self, *args, **kwargs)
        except TimeoutError:
            _misses.append((None, f"{_peer(self)}: no answer within {self.gettimeout()}s"))
            raise

    def recorded_recv(self: socket.socket, *args: Any, **kwargs: Any) -> bytes:
        try:
            return recv(self, *args, **kwargs)
        except TimeoutError:
            _misses.append((None, f"{_peer(self)}: no answer within {self.gettimeout()}s"))
            raise

    def recorded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return getaddrinfo(host, port, *args, **kwargs)
        except socket.gaierror as exc:
            _misses.append((_port((host, port)), f"{host}:{port}: name lookup failed ({exc.strerror})"))
            raise

    socket.socket.connect = recorded_connect  # type: ignore[method-assign,assignment]
    socket.socket.recv_into = recorded_recv_into  # type: ignore[method-assign,assignment]
    socket.socket.recv = recorded_recv  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = recorded_getaddrinfo


def _peer(sock: socket.socket) -> str:
    try:
        return _where(sock.getpeername())
    except OSError:
        return "a server"


def begin() -> None:
    """A verdict starts: forget the previous one's misses."""
    _misses.clear()


def misses() -> list[str]:
    """What the verdict under way could not reach, so far (empty unless `install()` ran in this process)."""
    return [text for _, text in _misses]
