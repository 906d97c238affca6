"""Key-value stores (``torch.distributed.Store``): the base API, ``HashStore``, ``PrefixStore``.

Processes meet through a store before any engine exists: they publish their addresses, count
arrivals and wait for each other. Every store offers the same calls (``set``/``get``/``add``/
``wait``/``compare_set``/``delete_key``/``num_keys``/...) with a timeout; a blocking call past it
raises ``DistStoreError``, as PyTorch's do.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from ._errors import DistStoreError

DEFAULT_TIMEOUT = timedelta(seconds=300)


def as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"store values must be str or bytes, got {type(value).__name__}")


def check_key(key) -> str:
    if not isinstance(key, str):
        raise TypeError(f"store keys must be str, got {type(key).__name__}")
    return key


def as_seconds(timeout) -> float:
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def timeout_error(seconds: float, keys) -> DistStoreError:
    listed = ", ".join("/" + k for k in keys)
    return DistStoreError(f"wait timeout after {round(seconds * 1000)}ms, keys: {listed}")


class Store:
    """Interface of every store. Subclasses implement the primitives below the line."""

    def __init__(self, timeout: timedelta = DEFAULT_TIMEOUT):
        self._timeout = timeout

    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout

    def wait(self, keys, timeout: timedelta | None = None) -> None:
        """Blocks until every key in ``keys`` exists, or raises ``DistStoreError`` after the timeout."""
        keys = [check_key(k) for k in keys]
        self._wait(keys, as_seconds(self._timeout if timeout is None else timeout))

    def get(self, key: str) -> bytes:
        """Value of ``key``, waiting up to the store's timeout for someone to set it."""
        key = check_key(key)
        self._wait([key], as_seconds(self._timeout))
        return self._get(key)

    def multi_get(self, keys) -> list[bytes]:
        keys = [check_key(k) for k in keys]
        self._wait(keys, as_seconds(self._timeout))
        return [self._get(k) for k in keys]

    def multi_set(self, keys, values) -> None:
        for key, value in zip(keys, values):
            self.set(key, value)

    def check(self, keys) -> bool:
        """True when every key exists (never waits)."""
        return all(self._exists(check_key(k)) for k in keys)

    def queue_push(self, key: str, value) -> None:
        self.append(key, as_bytes(value))

    # -- primitives (subclasses) -----------------------------------------------------------
    def set(self, key: str, value) -> None:
        raise NotImplementedError

    def add(self, key: str, amount: int) -> int:
        raise NotImplementedError

    def append(self, key: str, value) -> None:
        raise NotImplementedError

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        raise NotImplementedError

    def delete_key(self, key: str) -> bool:
        raise NotImplementedError

    def num_keys(self) -> int:
        raise NotImplementedError

    def _get(self, key: str) -> bytes:
        raise NotImplementedError

    def _exists(self, key: str) -> bool:
        raise NotImplementedError

    def _wait(self, keys: list[str], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        delay = 0.001
        while not all(self._exists(k) for k in keys):
            if time.monotonic() >= deadline:
                raise timeout_error(seconds, [k for k in keys if not self._exists(k)])
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


class _Table:
    """The shared dict behind ``HashStore`` and the ``TCPStore`` server, with waiting."""

    def __init__(self):
        self.data: dict[str, bytes] = {}
        self.changed = threading.Condition()

    def set(self, key: str, value: bytes) -> None:
        with self.changed:
            self.data[key] = value
            self.changed.notify_all()

    def add(self, key: str, amount: int) -> int:
        with self.changed:
            current = self.data.get(key, b"0")
            try:
                total = int(current) + int(amount)
            except ValueError:
                raise ValueError(f"store key {key!r} does not hold an integer") from None
            self.data[key] = str(total).encode()
            self.changed.notify_all()
            return total

    def append(self, key: str, value: bytes) -> None:
        with self.changed:
            self.data[key] = self.data.get(key, b"") + value
            self.changed.notify_all()

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        with self.changed:
            current = self.data.get(key)
            if current is None:
                if expected == b"":
                    self.data[key] = desired
                    self.changed.notify_all()
                    return desired
                return expected
            if current == expected:
                self.data[key] = desired
                self.changed.notify_all()
                return desired
            return current

    def delete(self, key: str) -> bool:
        with self.changed:
            return self.data.pop(key, None) is not None

    def wait(self, keys: list[str], seconds: float) -> bool:
        """True once all keys exist; False after ``seconds``."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while not all(k in self.data for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True


    def wait_value(self, key: str, value: int, seconds: float) -> bool:
        """True once the counter ``key`` reaches ``value``; False after ``seconds``."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while int(self.data.get(key, b"0")) < value:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True


class HashStore(Store):
    """A store in this process's memory, shared by its threads."""

    def __init__(self):
        super().__init__()
        self._table = _Table()

    def set(self, key, value):
        self._table.set(check_key(key), as_bytes(value))

    def add(self, key, amount):
        return self._table.add(check_key(key), amount)

    def append(self, key, value):
        self._table.append(check_key(key), as_bytes(value))

    def compare_set(self, key, expected_value, desired_value):
        return self._table.compare_set(check_key(key), as_bytes(expected_value), as_bytes(desired_value))

    def delete_key(self, key):
        return self._table.delete(check_key(key))

    def num_keys(self):
        return len(self._table.data)

    def _get(self, key):
        return self._table.data[key]

    def _exists(self, key):
        return key in self._table.data

    def _wait(self, keys, seconds):
        if not self._table.wait(keys, seconds):
            raise timeout_error(seconds, [k for k in keys if k not in self._table.data])


class PrefixStore(Store):
    """Puts every key of ``store`` under ``prefix + "/"``, so several users share one store."""

    def __init__(self, prefix: str, store: Store):
        super().__init__(store.timeout)
        self._prefix = prefix
        self._store = store

    @property
    def underlying_store(self) -> Store:
        return self._store

    @property
    def timeout(self):
        return self._store.timeout

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    def _key(self, key: str) -> str:
        return f"{self._prefix}/{check_key(key)}"

    def set(self, key, value):
        self._store.set(self._key(key), value)

    def get(self, key):
        return self._store.get(self._key(key))

    def add(self, key, amount):
        return self._store.add(self._key(key), amount)

    def append(self, key, value):
        self._store.append(self._key(key), value)

    def compare_set(self, key, expected_value, desired_value):
        return self._store.compare_set(self._key(key), expected_value, desired_value)

    def delete_key(self, key):
        return self._store.delete_key(self._key(key))

    def num_keys(self):
        return self._store.num_keys()

    def wait(self, keys, timeout=None):
        self._store.wait([self._key(k) for k in keys], timeout)

    def check(self, keys):
        return self._store.check([self._key(k) for k in keys])

    def multi_get(self, keys):
        return self._store.multi_get([self._key(k) for k in keys])
