"""``init_method`` URLs to (store, rank, world size): ``env://``, ``tcp://host:port``, ``file://path``.

Same rules and messages as PyTorch's rendezvous handlers: ``env://`` reads ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE`` (arguments win over the environment); rank 0 hosts
the ``TCPStore``; query parameters ``?rank=&world_size=`` fill in what the call left out.
"""

from __future__ import annotations

import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from ._file_store import FileStore
from ._tcp_store import TCPStore


def _env_error(var: str) -> ValueError:
    return ValueError(
        f"Error initializing torch.distributed using env:// rendezvous: environment variable {var} "
        "expected, but not set"
    )


def _error(scheme: str, what: str) -> ValueError:
    return ValueError(f"Error initializing torch.distributed using {scheme}:// rendezvous: {what}")


def _from_query(query: dict, name: str, given: int) -> int:
    if given is not None and given != -1:
        return int(given)
    if name in query:
        return int(query[name][0])
    return -1


def rendezvous(init_method: str, rank: int, world_size: int, timeout: timedelta):
    """Returns ``(store, rank, world_size)`` for ``init_method``."""
    url = urlparse(init_method)
    query = parse_qs(url.query)
    if url.scheme == "env":
        rank = _from_query(query, "rank", rank)
        world_size = _from_query(query, "world_size", world_size)
        if rank == -1:
            if "RANK" not in os.environ:
                raise _env_error("RANK")
            rank = int(os.environ["RANK"])
        if world_size == -1:
            if "WORLD_SIZE" not in os.environ:
                raise _env_error("WORLD_SIZE")
            world_size = int(os.environ["WORLD_SIZE"])
        for var in ("MASTER_ADDR", "MASTER_PORT"):
            if var not in os.environ:
                raise _env_error(var)
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            port = _beside_agent_store(port)
        return _tcp(host, port, rank, world_size, timeout), rank, world_size
    if url.scheme == "tcp":
        rank = _from_query(query, "rank", rank)
        world_size = _from_query(query, "world_size", world_size)
        if rank == -1:
            raise _error("tcp", "rank parameter missing")
        if world_size == -1:
            raise _error("tcp", "world size parameter missing")
        if url.port is None:
            raise _error("tcp", "port number missing")
        if url.hostname is None:
            raise _error("tcp", "hostname missing")
        return _tcp(url.hostname, url.port, rank, world_size, timeout), rank, world_size
    if url.scheme == "file":
        rank = _from_query(query, "rank", rank)
        world_size = _from_query(query, "world_size", world_size)
        if rank == -1:
            raise _error("file", "rank parameter missing")
        if world_size == -1:
            raise _error("file", "world size parameter missing")
        path = url.path if not url.netloc else url.netloc + url.path
        if not path:
            raise _error("file", "path missing")
        return FileStore(path, world_size, timeout), rank, world_size
    raise RuntimeError(f"No rendezvous handler for {url.scheme}://")


def _beside_agent_store(port: int) -> int:
    """The port of ember's store under PyTorch's ``torchrun``, whose agent already serves a
    PyTorch TCPStore at MASTER_PORT (``TORCHELASTIC_USE_AGENT_STORE=True``): ember's store speaks
    its own wire format, so rank 0 hosts it at ``EMBER_STORE_PORT``, by default MASTER_PORT + 1
    (docs/deviations.md). ``ember-run`` sets the variable to False and needs no second port."""
    chosen = int(os.environ.get("EMBER_STORE_PORT", port + 1))
    if not 0 < chosen < 2**16:
        raise ValueError(f"port must have value from 0 to 65535 but was {chosen}.")
    return chosen


def _tcp(host: str, port: int, rank: int, world_size: int, timeout: timedelta) -> TCPStore:
    _check(rank, world_size)
    # Rank 0 hosts; joining is checked by the process group (naming who is missing), not here.
    return TCPStore(host, port, world_size, rank == 0, timeout, wait_for_workers=False)


def _check(rank: int, world_size: int) -> None:
    if world_size < 1:
        raise ValueError(f"world_size must be positive, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size), got rank {rank} for world size {world_size}")
