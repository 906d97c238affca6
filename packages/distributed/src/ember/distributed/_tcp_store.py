"""``TCPStore``: a key-value server in one process (the master), clients in every process.

The wire format is a frame of byte strings: ``u32 count`` then ``u32 length + bytes`` for each;
the first string of a request names the command. Nothing on the wire is ever unpickled. The
server runs one thread per connection over a shared table, so a client blocked in ``get``
does not hold up the others.
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
import threading
import time
from datetime import timedelta

from ._errors import DistNetworkError, DistStoreError
from ._store import DEFAULT_TIMEOUT, Store, _Table, as_bytes, as_seconds, check_key, timeout_error

_U32 = struct.Struct("!I")
_INIT_KEY = "init/"
_RECONNECT_SECONDS = 5.0  # how long a dropped client looks for a successor server
_IDEMPOTENT = {b"set", b"get", b"check", b"wait", b"num_keys", b"delete"}


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("store connection closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def send_frame(sock: socket.socket, parts: list[bytes]) -> None:
    out = [_U32.pack(len(parts))]
    for part in parts:
        out += [_U32.pack(len(part)), part]
    sock.sendall(b"".join(out))


def recv_frame(sock: socket.socket) -> list[bytes]:
    (count,) = _U32.unpack(_recv_exact(sock, 4))
    parts = []
    for _ in range(count):
        (size,) = _U32.unpack(_recv_exact(sock, 4))
        parts.append(_recv_exact(sock, size))
    return parts


class _Server:
    """The master's listening socket and the table every client reads and writes."""

    def __init__(self, host: str, port: int):
        self.table = _Table()
        self._conns: set = set()
        # Guards _closed and _conns together: a connection accepted while close() runs is either
        # in close()'s snapshot or sees _closed and is dropped, never left served by a dead table
        # (a client that reached the old server as it closed would wait there forever).
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # SO_REUSEADDR lets a restarted job take its port back from connections still in
        # TIME_WAIT; on Linux a port that a live server listens on still fails (EADDRINUSE).
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
            self._sock.listen(128)
        except OSError as err:
            self._sock.close()
            code = err.errno or 0
            raise DistNetworkError(
                "The server socket has failed to listen on any local network address. "
                f"port: {port}, useIpv6: false, code: -{code}, name: {errno.errorcode.get(code, '?')}, "
                f"message: {err.strerror}"
            ) from None
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, name="ember-tcpstore", daemon=True).start()

    def close(self) -> None:
        """Stops listening and drops every client: a client of a closed server must notice (and
        reconnect to a successor on the same port), not keep talking to a dead table.

        Idempotent, and a second call takes no lock: the store's ``__del__`` may call it again while
        the interpreter shuts down, when a daemon serving thread can be frozen holding the lock
        forever (it took the lock, then could not get the GIL back)."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            socks = [self._sock, *self._conns]
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def client_count(self) -> int:
        """Connections open to this server now (the master's own client included)."""
        return len(self._conns)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                request = recv_frame(conn)
                send_frame(conn, self._answer(request))
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            # No lock: set.discard is atomic under the GIL, and a serving thread must not be able
            # to freeze holding the lock at interpreter shutdown (see close()).
            self._conns.discard(conn)
            conn.close()

    def _answer(self, request: list[bytes]) -> list[bytes]:
        cmd, args = request[0], request[1:]
        table = self.table
        try:
            if cmd == b"set":
                table.set(args[0].decode(), args[1])
                return [b"ok"]
            if cmd == b"get":
                return [b"ok", table.data[args[0].decode()]]
            if cmd == b"add":
                return [b"ok", str(table.add(args[0].decode(), int(args[1]))).encode()]
            if cmd == b"append":
                table.append(args[0].decode(), args[1])
                return [b"ok"]
            if cmd == b"cas":
                return [b"ok", table.compare_set(args[0].decode(), args[1], args[2])]
            if cmd == b"delete":
                return [b"ok", b"1" if table.delete(args[0].decode()) else b"0"]
            if cmd == b"num_keys":
                return [b"ok", str(len(table.data)).encode()]
            if cmd == b"check":
                return [b"ok", b"1" if all(k.decode() in table.data for k in args) else b"0"]
            if cmd == b"wait":
                seconds = float(args[0])
                keys = [k.decode() for k in args[1:]]
                return [b"ok" if table.wait(keys, seconds) else b"timeout"]
        except (KeyError, ValueError) as err:
            return [b"error", str(err).encode()]
        return [b"error", b"unknown store command " + cmd]


def connect(host: str, port: int, seconds: float) -> socket.socket:
    """A connected socket, retrying until ``seconds`` pass (the server may start later)."""
    deadline = time.monotonic() + seconds
    delay = 0.01
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=max(0.05, deadline - time.monotonic()))
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError:
            if time.monotonic() + delay >= deadline:
                raise DistNetworkError(
                    f"The client socket has timed out after {round(seconds * 1000)}ms while trying to "
                    f"connect to ({host}, {port})."
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class TCPStore(Store):
    """``torch.distributed.TCPStore``: ``is_master=True`` also runs the server on ``port``
    (0 picks a free one; ``.port`` tells which)."""

    def __init__(
        self,
        host_name: str,
        port: int,
        world_size: int | None = None,
        is_master: bool = False,
        timeout: timedelta = DEFAULT_TIMEOUT,
        wait_for_workers: bool = True,
        multi_tenant: bool = False,
        master_listen_fd: int | None = None,
        use_libuv: bool = True,
    ):
        super().__init__(timeout)
        if not isinstance(host_name, str):
            raise TypeError(f"host_name must be str, got {type(host_name).__name__}")
        if not 0 <= int(port) < 65536:
            raise ValueError(f"port must be in [0, 65535], got {port}")
        self._host = host_name
        self._server = _Server("" if host_name in ("0.0.0.0", "") else host_name, port) if is_master else None
        self._port = self._server.port if self._server is not None else int(port)
        self._world_size = world_size
        self._lock = threading.Lock()
        seconds = as_seconds(timeout)
        self._sock = connect(host_name, self._port, seconds)
        if wait_for_workers and world_size:
            # Every process counts itself in under the key PyTorch uses ("init/"), so num_keys agrees.
            self.add(_INIT_KEY, 1)
            if self._server is not None and not self._server.table.wait_value(_INIT_KEY, world_size, seconds):
                joined = int(self._server.table.data.get(_INIT_KEY, b"0"))
                raise DistStoreError(
                    f"Timed out after {seconds:g} seconds waiting for clients. {joined}/{world_size} clients joined."
                )

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    @property
    def libuvBackend(self) -> bool:  # noqa: N802 (PyTorch's name)
        return False

    def _call(self, request: list[bytes], seconds: float | None = None) -> list[bytes]:
        with self._lock:
            try:
                reply = self._exchange(request, seconds)
            except (OSError, ConnectionError) as err:
                # The server may have been replaced (a job restarted on the same port while this
                # client still held a connection to the old one): reconnect, and repeat requests
                # that are safe to repeat.
                if request[0] not in _IDEMPOTENT:
                    raise DistStoreError(f"TCPStore at {self._host}:{self._port} is unreachable: {err}") from None
                try:
                    self._sock.close()
                    window = min(as_seconds(self._timeout), _RECONNECT_SECONDS)
                    self._sock = connect(self._host, self._port, window)
                    reply = self._exchange(request, seconds)
                except (OSError, ConnectionError, DistNetworkError) as again:
                    raise DistStoreError(f"TCPStore at {self._host}:{self._port} is unreachable: {again}") from None
        if reply[0] == b"error":
            raise ValueError(reply[1].decode())
        return reply

    def _exchange(self, request: list[bytes], seconds: float | None) -> list[bytes]:
        self._sock.settimeout(None if seconds is None else seconds + 5.0)
        send_frame(self._sock, request)
        return recv_frame(self._sock)

    def set(self, key, value):
        self._call([b"set", check_key(key).encode(), as_bytes(value)])

    def _get(self, key):
        return self._call([b"get", key.encode()])[1]

    def add(self, key, amount):
        return int(self._call([b"add", check_key(key).encode(), str(int(amount)).encode()])[1])

    def append(self, key, value):
        self._call([b"append", check_key(key).encode(), as_bytes(value)])

    def compare_set(self, key, expected_value, desired_value):
        request = [b"cas", check_key(key).encode(), as_bytes(expected_value), as_bytes(desired_value)]
        return self._call(request)[1]

    def delete_key(self, key):
        return self._call([b"delete", check_key(key).encode()])[1] == b"1"

    def num_keys(self):
        return int(self._call([b"num_keys"])[1])

    def _exists(self, key):
        return self._call([b"check", key.encode()])[1] == b"1"

    def check(self, keys):
        return self._call([b"check", *[check_key(k).encode() for k in keys]])[1] == b"1"

    def _wait(self, keys, seconds):
        reply = self._call([b"wait", repr(seconds).encode(), *[k.encode() for k in keys]], seconds)
        if reply[0] == b"timeout":
            raise timeout_error(seconds, [k for k in keys if not self._exists(k)])

    def close(self) -> None:
        """Closes this client and, on the master, the server."""
        try:
            self._sock.close()
        finally:
            if self._server is not None:
                self._server.close()

    def __del__(self):
        if sys.is_finalizing():  # the OS closes the sockets; locks may belong to frozen threads
            return
        try:
            self.close()
        except Exception:
            pass
