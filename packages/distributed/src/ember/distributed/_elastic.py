"""Dynamic rendezvous for ``ember-run --nnodes MIN:MAX`` (torchrun's c10d rendezvous, simplified).

Every node's launcher meets at ``--rdzv-endpoint``: the first one that can bind the port hosts a
``TCPStore`` there, the others connect (the host leaves last: ``Rendezvous.leave``). A round
closes when ``MAX`` nodes have joined, or ``last_call_timeout`` seconds after ``MIN`` have
(``--rdzv-conf last_call_timeout=S``, default ``1``); nodes take their node rank from their
arrival order. Node 0 publishes its address and a free port for the workers' own store. Nodes
arriving after the close fail with a message (their round is full). A worker failure on any node
bumps the store's restart counter: every launcher stops its workers and all nodes meet again in
the next round, up to ``--max-restarts`` times.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta

from ._tcp_store import TCPStore


def parse_conf(text: str) -> dict:
    conf = {}
    for item in filter(None, (p.strip() for p in (text or "").split(","))):
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    return conf


def connect(endpoint: str, join_timeout: float) -> TCPStore:
    host, _, port = endpoint.rpartition(":") if ":" in endpoint else (endpoint, "", "29400")
    port = int(port or 29400)
    try:
        return TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=join_timeout))
    except Exception:  # noqa: BLE001 - the port is taken: another node hosts the rendezvous
        return TCPStore(host, port, is_master=False, timeout=timedelta(seconds=join_timeout))


def _local_address() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Rendezvous:
    def __init__(self, store: TCPStore, min_nodes: int, max_nodes: int, conf: dict, join_timeout: float):
        self.store, self.min_nodes, self.max_nodes = store, min_nodes, max_nodes
        self.last_call = float(conf.get("last_call_timeout", 1.0))
        self.join_timeout = join_timeout

    def leave(self, timeout: float = 300.0) -> None:
        """Called once this launcher is done. The launcher hosting the store stays until every
        other launcher has disconnected (or ``timeout`` passes, torchrun's exit-barrier default):
        leaving earlier would pull the store from under nodes whose workers are still running
        (their monitor polls it), failing a job that succeeded. A killed launcher's connection
        closes too, so a dead node does not hold the host for the whole timeout."""
        server = self.store._server
        if server is None:
            self.store.close()
            return
        deadline = time.monotonic() + timeout
        while server.client_count() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)

    def current_round(self) -> int:
        return int(self.store.add("rdzv/restarts", 0))

    def request_restart(self, seen_round: int) -> None:
        self.store.compare_set("rdzv/restarts", str(seen_round), str(seen_round + 1))

    def join(self, round_: int, master_addr: str | None):
        """(node rank, number of nodes, master address, master port) of this round."""
        prefix = f"rdzv/{round_}/"
        index = int(self.store.add(prefix + "joined", 1)) - 1
        start = time.monotonic()
        reached = None
        while True:
            closed = self.store.compare_set(prefix + "closed", "", "")
            if closed:
                nodes = int(closed)
                break
            joined = int(self.store.add(prefix + "joined", 0))
            now = time.monotonic()
            if joined >= self.min_nodes and reached is None:
                reached = now
            if joined >= self.max_nodes or (reached is not None and now - reached >= self.last_call):
                nodes = min(joined, self.max_nodes)
                # The first node to close the round fixes its size; later closers read it back.
                nodes = int(self.store.compare_set(prefix + "closed", "", str(nodes)))
                break
            if now - start > self.join_timeout:
                raise TimeoutError(f"rendezvous round {round_}: {joined} node(s) joined within {self.join_timeout}s, "
                                   f"{self.min_nodes} needed")
            time.sleep(0.05)
        if index >= nodes:
            raise RuntimeError(f"rendezvous round {round_} closed with {nodes} node(s) before this node joined")
        if index == 0:
            self.store.set(prefix + "master", f"{master_addr or _local_address()}:{_free_port()}")
        addr, _, port = self.store.get(prefix + "master").decode().rpartition(":")
        return index, nodes, addr, int(port)
