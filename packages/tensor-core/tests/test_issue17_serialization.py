"""Regression tests for issue 17's checkpoint findings: saving keeps what the path names (links,
mode, /proc/self/fd, long names) while staying atomic; loading bounds its work and refuses
ambiguous archives; big-endian complex records; the weights_only allow-list API."""

from __future__ import annotations

import io
import os
import stat
import sys
import threading
import time
import zipfile

import numpy as np
import pytest

import ember
from ember.serialization import UnpicklingError

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX files and /proc")


@linux_only
def test_symlink_stays_a_link_and_its_target_is_replaced(tmp_path):
    ember.save({"v": 1}, tmp_path / "real.pt")
    os.symlink("real.pt", tmp_path / "link.pt")
    ember.save({"v": 2}, tmp_path / "link.pt")
    assert os.path.islink(tmp_path / "link.pt")
    assert ember.load(tmp_path / "real.pt") == {"v": 2}
    os.symlink("new.pt", tmp_path / "dangling.pt")
    ember.save({"v": 3}, tmp_path / "dangling.pt")
    assert os.path.islink(tmp_path / "dangling.pt") and ember.load(tmp_path / "new.pt") == {"v": 3}


@linux_only
def test_mode_and_hard_links_are_kept(tmp_path):
    path = tmp_path / "ckpt.pt"
    ember.save({"v": 1}, path)
    os.chmod(path, 0o600)
    ember.save({"v": 2}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.link(path, tmp_path / "other.pt")
    ember.save({"v": 3}, tmp_path / "other.pt")
    assert ember.load(path) == {"v": 3} and os.stat(path).st_nlink == 2
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt", "other.pt"]  # no temporary file left


@linux_only
def test_proc_self_fd_fifo_and_device_paths(tmp_path):
    fd = os.open(tmp_path / "viafd.pt", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        ember.save({"v": 1}, f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    assert ember.load(tmp_path / "viafd.pt") == {"v": 1}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()))
    reader.start()
    ember.save({"v": 2}, fifo)
    reader.join(10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and ember.load(io.BytesIO(received[0])) == {"v": 2}
    ember.save({"v": 3}, "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("length", [238, 245, 251])
def test_long_file_names(tmp_path, length):
    path = tmp_path / ("x" * (length - 3) + ".pt")
    ember.save({"v": length}, path)
    ember.save({"v": length + 1}, path)  # replacing needs a temporary name beside it
    assert ember.load(path) == {"v": length + 1}


def _archive(records: list[tuple[str, bytes]]) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            z.writestr("archive/" + name, data)
    buf.seek(0)
    return buf


def _records(saved: io.BytesIO) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(saved) as z:
        return [(i.filename.partition("/")[2], z.read(i)) for i in z.infolist()]


def test_nested_tuples_are_bounded():
    # t0 = (1,); t(i+1) = (t_i, t_i) through the memo; then {t_400: None}. Hashing t_400 is 2**400 steps.
    ops = [b"\x80\x02", b"K\x01\x85q\x00"]
    for i in range(400):
        ops.append(b"h" + bytes([i % 256]) if i < 256 else b"j" + i.to_bytes(4, "little"))
        ops.append(b"h" + bytes([i % 256]) if i < 256 else b"j" + i.to_bytes(4, "little"))
        ops.append(b"\x86" + (b"q" + bytes([i + 1]) if i + 1 < 256 else b"r" + (i + 1).to_bytes(4, "little")))
    ops.append(b"0}(" + (b"j" + (400).to_bytes(4, "little")) + b"Nu.")
    buf = _archive([("data.pkl", b"".join(ops)), ("version", b"3\n")])
    start = time.perf_counter()
    with pytest.raises(UnpicklingError, match="too large to hash"):
        ember.load(buf)
    assert time.perf_counter() - start < 10


def test_duplicate_data_pkl_is_refused():
    saved = io.BytesIO()
    ember.save({"v": 1}, saved)
    records = _records(saved)
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name it writes
        buf = _archive(records + [("data.pkl", dict(records)["data.pkl"])])
    with pytest.raises(RuntimeError, match="appears twice"):
        ember.load(buf)


def test_storage_reused_under_another_dtype_is_refused():
    saved = io.BytesIO()
    ember.save([ember.tensor([1.0, 2.0]), ember.tensor([True, False])], saved)
    records = dict(_records(saved))
    pkl = records["data.pkl"]
    # Point the bool tensor's storage reference at the float tensor's record "0".
    pkl = pkl.replace(b"X\x01\x00\x00\x001", b"X\x01\x00\x00\x000", 1)
    records["data.pkl"] = pkl
    with pytest.raises(UnpicklingError, match="referenced as both"):
        ember.load(_archive(list(records.items())))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32, np.int64])
def test_big_endian_records(dtype):
    values = (np.arange(6) - 2.5).astype(dtype) * (1 + 2j if np.issubdtype(dtype, np.complexfloating) else 1)
    saved = io.BytesIO()
    ember.save(ember.tensor(values), saved)
    records = dict(_records(saved))
    records["byteorder"] = b"big"
    records["data/0"] = values.astype(values.dtype.newbyteorder(">")).tobytes()
    back = ember.load(_archive(list(records.items())))
    np.testing.assert_array_equal(back.numpy(), values)


class _Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def test_safe_globals_allow_list():
    buf = io.BytesIO()
    ember.save({"p": _Point(ember.ones(2), 3)}, buf)
    buf.seek(0)
    assert ember.serialization.get_unsafe_globals_in_checkpoint(buf) == [f"{__name__}._Point"]
    buf.seek(0)
    with pytest.raises(UnpicklingError, match="_Point"):
        ember.load(buf)
    buf.seek(0)
    with ember.serialization.safe_globals([_Point]):
        p = ember.load(buf)["p"]
        assert ember.serialization.get_safe_globals() == [_Point]
    assert p.y == 3 and p.x.tolist() == [1.0, 1.0] and ember.serialization.get_safe_globals() == []
    ember.serialization.add_safe_globals([(_Point, f"{__name__}._Point")])
    try:
        buf.seek(0)
        assert ember.load(buf)["p"].y == 3
    finally:
        ember.serialization.clear_safe_globals()
    buf.seek(0)
    assert ember.load(buf, weights_only=False)["p"].y == 3
