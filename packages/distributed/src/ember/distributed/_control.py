"""The control server rank 0 runs: PMI-1 for MPICH, plus a liveness channel for every rank.

Processes that ``mpiexec`` did not start cannot join one MPI world after the fact. They can if
something speaks the PMI-1 "simple" wire protocol to MPICH's ``MPI_Init`` (a line-based
``key=value`` exchange over TCP; notes/build-facts.md records the messages, measured): each
process sets ``PMI_PORT``/``PMI_ID``/``PMI_RANK``/``PMI_SIZE`` and MPICH connects here to put
and get its business card and to meet the others at barriers. The data path stays MPICH's own
(shared memory on one host, TCP across hosts); this server is control plane only.

The same port serves the liveness watch: each rank keeps one connection open for as long as it
is in the process group. A connection that closes tells the server that rank exited (cleanly if
it said ``bye`` first), and the server tells every other rank, so a collective waiting on a
dead peer fails within seconds instead of hanging (MPI alone would wait forever).
"""

from __future__ import annotations

import socket
import threading

# One connection's first line decides which protocol it speaks.
_WATCH_HELLO = "ember-watch"


def _parse(line: str) -> dict:
    fields = {}
    for item in line.split():
        key, _, value = item.partition("=")
        fields[key] = value
    return fields


def process_mapping(hosts: list[str]) -> str:
    """MPICH's ``PMI_process_mapping`` value: which node each rank runs on, as runs of ranks.

    ``(vector,(node,1,count),...)`` lists consecutive ranks that share a node, nodes numbered
    in order of first appearance; MPICH uses it to pick shared memory between local ranks.
    """
    node_ids: dict[str, int] = {}
    runs: list[list[int]] = []
    for host in hosts:
        node = node_ids.setdefault(host, len(node_ids))
        if runs and runs[-1][0] == node:
            runs[-1][1] += 1
        else:
            runs.append([node, 1])
    return "(vector," + ",".join(f"({node},1,{count})" for node, count in runs) + ")"


class ControlServer:
    """PMI-1 server and liveness hub for one MPI world of ``world_size`` processes."""

    def __init__(self, world_size: int, hosts: list[str] | None = None, host: str = "0.0.0.0",
                 timeout: float | None = None):
        self.world_size = world_size
        self.timeout = timeout
        self.kvsname = f"ember_kvs_{socket.gethostname()}_{id(self):x}"
        self._kvs: dict[str, str] = {}
        if hosts is not None:
            self._kvs["PMI_process_mapping"] = process_mapping(hosts)
        self._lock = threading.Lock()
        self._barrier_waiting: list = []
        self._barrier_ranks: set = set()
        self._barrier_timer = None
        self._watchers: dict[int, tuple] = {}  # rank -> (socket, send lock)
        self._pmi_rank: dict = {}  # PMI connection -> rank
        self._exited: dict[int, bool] = {}  # rank -> clean
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(max(world_size * 2, 16))
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, name="ember-control", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    # -- connections ----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        send_lock = threading.Lock()
        reader = conn.makefile("r", encoding="ascii", newline="\n")
        try:
            first = reader.readline()
            if first.startswith(_WATCH_HELLO):
                self._serve_watch(conn, send_lock, reader, int(_parse(first)["rank"]))
            elif first:
                self._serve_pmi(conn, send_lock, reader, first)
        except (OSError, ValueError, KeyError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    @staticmethod
    def _send(conn: socket.socket, send_lock: threading.Lock, text: str) -> None:
        with send_lock:
            conn.sendall(text.encode("ascii"))

    # -- PMI-1 ----------------------------------------------------------------------------

    def _serve_pmi(self, conn, send_lock, reader, line: str) -> None:
        while line:
            reply = self._pmi_reply(conn, send_lock, _parse(line))
            if reply is not None:
                self._send(conn, send_lock, reply)
            if line.startswith("cmd=finalize"):
                return
            line = reader.readline()

    def _pmi_reply(self, conn, send_lock, msg: dict) -> str | None:
        cmd = msg.get("cmd")
        if cmd == "initack":
            rank = msg.get("pmiid", "0")
            with self._lock:
                self._pmi_rank[conn] = int(rank)
            return (
                f"cmd=initack rc=0\ncmd=set size={self.world_size}\n"
                f"cmd=set rank={rank}\ncmd=set debug=0\n"
            )
        if cmd == "init":
            return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        if cmd == "get_maxes":
            return "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024 rc=0\n"
        if cmd == "get_appnum":
            return "cmd=appnum appnum=0 rc=0\n"
        if cmd == "get_universe_size":
            return f"cmd=universe_size size={self.world_size} rc=0\n"
        if cmd == "get_my_kvsname":
            return f"cmd=my_kvsname kvsname={self.kvsname} rc=0\n"
        if cmd == "put":
            with self._lock:
                self._kvs[msg.get("key", "")] = msg.get("value", "")
            return "cmd=put_result rc=0\n"
        if cmd == "get":
            with self._lock:
                value = self._kvs.get(msg.get("key", ""))
            if value is None:
                return "cmd=get_result rc=-1 msg=key_not_found\n"
            return f"cmd=get_result rc=0 value={value}\n"
        if cmd == "barrier_in":
            with self._lock:
                failure = self._init_failure()
                if failure is None:
                    self._barrier_waiting.append((conn, send_lock))
                    self._barrier_ranks.add(self._pmi_rank.get(conn))
                    if len(self._barrier_waiting) < self.world_size:
                        self._arm_barrier_timer()
                        return None
                everyone, self._barrier_waiting = self._barrier_waiting, []
                self._barrier_ranks = set()
            if failure is not None:
                return f"cmd=barrier_out rc=-1 msg={failure}\n"
            self._release(everyone, "cmd=barrier_out rc=0\n")
            return None
        if cmd == "finalize":
            return "cmd=finalize_ack rc=0\n"
        if cmd == "abort":
            return None
        return f"cmd={cmd}_result rc=-1 msg=unsupported\n"

    # -- failures while MPI starts ------------------------------------------------------------
    # MPI_Init meets every rank at PMI barriers. A rank that died after the rendezvous (its
    # liveness connection, opened before MPI_Init, closed) or never comes would keep the others
    # inside MPI_Init forever: the barrier answers them with an error instead, at once for a
    # death, after the process group's timeout for a rank that never arrives.

    def _init_failure(self) -> str | None:
        dead = sorted(rank for rank, clean in self._exited.items() if not clean)
        if dead:
            return "rank_" + "_".join(map(str, dead)) + "_exited_during_MPI_initialization"
        return None

    def _release(self, waiters, text: str) -> None:
        for other, other_lock in waiters:
            try:
                self._send(other, other_lock, text)
            except OSError:
                pass

    def _arm_barrier_timer(self) -> None:
        if self.timeout is None or self._barrier_timer is not None:
            return

        def expire():
            with self._lock:
                self._barrier_timer = None
                if not self._barrier_waiting:
                    return
                missing = sorted(set(range(self.world_size)) - self._barrier_ranks)
                everyone, self._barrier_waiting = self._barrier_waiting, []
                self._barrier_ranks = set()
            self._release(everyone, "cmd=barrier_out rc=-1 msg=ranks_" + "_".join(map(str, missing))
                          + "_did_not_reach_MPI_initialization\n")

        self._barrier_timer = threading.Timer(self.timeout, expire)
        self._barrier_timer.daemon = True
        self._barrier_timer.start()

    def _fail_waiting_barrier(self) -> None:
        with self._lock:
            failure = self._init_failure()
            if failure is None or not self._barrier_waiting:
                return
            everyone, self._barrier_waiting = self._barrier_waiting, []
            self._barrier_ranks = set()
        self._release(everyone, f"cmd=barrier_out rc=-1 msg={failure}\n")

    # -- liveness -------------------------------------------------------------------------

    def _serve_watch(self, conn, send_lock, reader, rank: int) -> None:
        with self._lock:
            # One watch per rank for the job's life: a second process claiming a rank that is watched (or
            # has left) is refused before it can replace the first one's channel or report it dead.
            taken = rank in self._watchers or rank in self._exited
            if not taken and 0 <= rank < self.world_size:
                self._watchers[rank] = (conn, send_lock)
            already = dict(self._exited)
        if taken or not 0 <= rank < self.world_size:
            why = "taken" if taken else "out_of_range"
            self._send(conn, send_lock, f"refused rank={rank} reason={why}\n")
            return
        self._send(conn, send_lock, f"ok rank={rank}\n")
        for gone, clean in already.items():  # a late watcher still learns who left
            self._send(conn, send_lock, f"exited rank={gone} clean={int(clean)}\n")
        clean = False
        try:
            for line in reader:
                if line.startswith("bye"):
                    clean = True
                    break
        except OSError:
            pass
        with self._lock:
            self._watchers.pop(rank, None)
            self._exited[rank] = clean
            others = list(self._watchers.values())
        self._fail_waiting_barrier()
        for other, other_lock in others:
            try:
                self._send(other, other_lock, f"exited rank={rank} clean={int(clean)}\n")
            except OSError:
                pass


class Watch:
    """A rank's end of the liveness channel: reports peers that exit through ``on_exit``."""

    def __init__(self, host: str, port: int, rank: int, on_exit, timeout: float):
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.sendall(f"{_WATCH_HELLO} rank={rank}\n".encode("ascii"))
        self._reader = self._sock.makefile("r", encoding="ascii", newline="\n")
        answer = self._reader.readline()  # within the connection timeout
        if not answer.startswith("ok"):
            self._sock.close()
            if answer.startswith("refused"):
                why = _parse(answer).get("reason")
                raise RuntimeError(
                    f"rank {rank} is already taken in this job by another process (two processes were started "
                    f"with RANK={rank})" if why == "taken" else f"rank {rank} is outside this job's world")
            raise OSError("the control server closed the liveness channel")
        self._sock.settimeout(None)
        self._on_exit = on_exit
        self._closing = False
        threading.Thread(target=self._listen, name="ember-watch", daemon=True).start()

    def _listen(self) -> None:
        reader = self._reader
        try:
            for line in reader:
                msg = _parse(line)
                if line.startswith("exited"):
                    self._on_exit(int(msg["rank"]), msg.get("clean") == "1")
        except (OSError, ValueError):
            pass
        if not self._closing:  # the server's process (rank 0) is gone
            self._on_exit(0, False)

    def close(self) -> None:
        """Says goodbye: the others learn this rank left on purpose."""
        self._closing = True
        try:
            self._sock.sendall(b"bye\n")
            self._sock.close()
        except OSError:
            pass
