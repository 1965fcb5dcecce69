"""A TCP front for the scripted LLM server that can be taken down or made to hang.

``up`` forwards every connection to the scripted server; ``down`` listens on nothing, so
connecting is refused; ``hang`` accepts connections and never reads or answers them. The
port stays the same across states, so clients built once (the SDK's, the embedder's) see
the endpoint fail and then recover, as they would in production.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

State = Literal["up", "down", "hang"]


class FlakyEndpoint:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.state: State = "down"
        self.port = _free_port()
        self._listener: socket.socket | None = None
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def set(self, state: State) -> None:
        with self._lock:
            self._close_listener()
            for conn in self._held:
                with contextlib.suppress(OSError):
                    conn.close()
            self._held.clear()
            self.state = state
            if state != "down":
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self.port))
                listener.listen(16)
                self._listener = listener
                threading.Thread(target=self._accept, args=(listener, state), daemon=True).start()

    def stop(self) -> None:
        self.set("down")

    def _close_listener(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None

    def _accept(self, listener: socket.socket, state: State) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was closed: the state changed
            with self._lock:
                self._held.append(conn)
            if state == "up":
                threading.Thread(target=self._forward, args=(conn,), daemon=True).start()
            # "hang": keep the connection open, never read from it, never answer.

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            client.close()
            return
        with self._lock:
            self._held.append(upstream)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
