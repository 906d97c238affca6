"""ember.load on hostile or damaged files: nothing runs, nothing reads out of bounds, errors are clear."""

from __future__ import annotations

import io
import os
import pickle
import random
import struct
import threading
import zipfile
from collections import OrderedDict

import pytest

import ember
from ember.serialization import UnpicklingError, _zipfile_format
from ember.serialization._pickle_writer import Global, Persistent, Pickler, Reduce

from conftest import torch


def zip_with(pkl: bytes, records: dict | None = None, prefix: str = "archive") -> io.BytesIO:
    """A well-formed checkpoint zip around an arbitrary pickle stream."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", pkl)
        for name, data in (records or {}).items():
            z.writestr(f"{prefix}/{name}", data)
        if "version" not in (records or {}):
            z.writestr(f"{prefix}/version", b"3\n")
    buf.seek(0)
    return buf


def assemble(obj) -> bytes:
    """Pickle bytes for hand-made streams (Global/Reduce/Persistent are written as given)."""
    return Pickler(lambda o: None).dumps(obj)


def tensor_call(size, stride, offset=0, numel=4, key="0", storage="FloatStorage", func="_rebuild_tensor_v2"):
    pid = Persistent(("storage", Global("torch", storage), key, "cpu", numel))
    return Reduce(Global("torch._utils", func), (pid, offset, size, stride, False, OrderedDict()))


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class EvilEval:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (eval, (f"open({self.path!r}, 'w')",))


@pytest.mark.parametrize("evil", [Evil, EvilEval])
def test_torch_saved_reduce_payload_never_runs(tmp_path, evil):
    sentinel = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2), "payload": evil(sentinel)}, buf)
    buf.seek(0)
    with pytest.raises(UnpicklingError, match=r"(system|eval).*nothing was executed"):
        ember.load(buf)  # weights_only=True, the default; weights_only=False runs the file, as in PyTorch
    assert not sentinel.exists()


@pytest.mark.parametrize("protocol", range(6))
def test_plain_pickle_payloads_of_every_protocol_never_run(tmp_path, protocol):
    sentinel = tmp_path / "pwned"
    buf = zip_with(pickle.dumps([1, Evil(sentinel)], protocol=protocol))
    with pytest.raises(UnpicklingError, match="system"):
        ember.load(buf)
    assert not sentinel.exists()


@pytest.mark.parametrize("stream, match", [
    (b"cos\nsystem\n(S'echo hi'\ntR.", "os.system"),
    (b"(S'echo hi'\nios\nsystem\n.", "os.system"),  # INST
    (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "os.system"),  # STACK_GLOBAL
    (b"\x80\x02cbuiltins\ngetattr\n.", "builtins.getattr"),
    (b"\x80\x02c__builtin__\n__import__\n.", "builtins.__import__"),
    (b"\x80\x02csubprocess\nPopen\n.", "subprocess.Popen"),
    (b"\x80\x02ctorch\nload\n.", "torch.load"),
    (b"\x80\x02ctorch._utils\n_rebuild_device_tensor_from_numpy\n.", "_rebuild_device_tensor_from_numpy"),
    (b"\x80\x02ccopy_reg\n_reconstructor\n.", "copyreg._reconstructor"),
])
def test_forbidden_globals_are_named(stream, match):
    with pytest.raises(UnpicklingError, match=match):
        ember.load(zip_with(stream))


@pytest.mark.parametrize("stream, match", [
    (b"\x80\x02ctorch\nfloat32\n)R.", "allow-listed"),  # REDUCE on a value, not a constructor
    (b"\x80\x02]K\x01\x85R.", "allow-listed"),  # REDUCE on a list
    (b"\x80\x02ccollections\nOrderedDict\nK\x01R.", "tuple"),  # arguments that are not a tuple
    (b"\x80\x02)K\x01a.", "APPEND on a tuple"),
    (b"\x80\x02ctorch\nfloat32\nK\x01K\x02s.", "SETITEM on a dtype"),
    (b"\x80\x02]}b.", "BUILD on a list"),
    (b"\x80\x02ccollections\nOrderedDict\n)R}X\x04\x00\x00\x00keysK\x01sb.", "replace"),
    (b"\x80\x02K\x01Q.", "storage"),  # persistent id that is not a storage reference
    (b"\x80\x02(X\x06\x00\x00\x00objectK\x01K\x02K\x03K\x04tQ.", "storage"),
    (b"\x80\x02h\x05.", "memo"),
    (b"\x80\x02K\x01", "truncated"),
    (b"\x80\x02X\xff\xff\x00\x00ab.", "truncated"),
    (b"\x80\x02\x82\x01.", "opcode"),  # EXT1
    (b"\x80\x09N.", "protocol"),
    (b"\x80\x02.", "underflow"),
    (b"\x80\x02K\x01K\x02.", "leftover"),
    (b"\x80\x02e.", "MARK"),
    (b"\x80\x02cbuiltins\nbytearray\nJ\x00\x00\x00\x40\x85R.", "bytes"),  # bytearray(2**30) never allocates
])
def test_malformed_or_abusive_streams(stream, match):
    with pytest.raises(UnpicklingError, match=match):
        ember.load(zip_with(stream))


@pytest.mark.parametrize("size, stride, offset, match", [
    ((5,), (1,), 0, "out of bounds"),  # 5 floats from a 4-float record
    ((2,), (4,), 0, "out of bounds"),
    ((1,), (1,), 4, "out of bounds"),
    ((2**40, 2**40), (1, 1), 0, "out of bounds"),
    ((2,), (-1,), 1, "Negative"),
    ((-2,), (1,), 0, "negative dimension"),
    ((2,), (1,), -1, "offset"),
    ((2, 2), (1,), 0, "mismatch"),
    ((2.0,), (1,), 0, "tuple of ints"),
])
def test_views_outside_the_record_are_refused(size, stride, offset, match):
    stream = assemble(tensor_call(size, stride, offset))
    with pytest.raises(UnpicklingError, match=match):
        ember.load(zip_with(stream, {"data/0": b"\x00" * 16}))


def test_in_bounds_hand_made_view_loads():
    stream = assemble(tensor_call((2,), (2,), 1))
    data = struct.pack("<4f", 0.0, 1.0, 2.0, 3.0)
    assert ember.load(zip_with(stream, {"data/0": data})).tolist() == [1.0, 3.0]


def test_missing_and_short_storage_records():
    with pytest.raises(RuntimeError, match="missing the record 'data/0'"):
        ember.load(zip_with(assemble(tensor_call((4,), (1,)))))
    with pytest.raises(RuntimeError, match="holds 8 bytes, but the checkpoint needs 16"):
        ember.load(zip_with(assemble(tensor_call((2,), (1,))), {"data/0": b"\x00" * 8}))
    huge = assemble(tensor_call((1,), (1,), numel=2**60))  # never allocated: the record is too small
    with pytest.raises(RuntimeError, match="holds 16 bytes"):
        ember.load(zip_with(huge, {"data/0": b"\x00" * 16}))


def test_one_record_referenced_with_a_larger_size():
    stream = assemble([tensor_call((1,), (1,), numel=1), tensor_call((4,), (1,), numel=4)])
    with pytest.raises(UnpicklingError, match="holds 4"):
        ember.load(zip_with(stream, {"data/0": b"\x00" * 16}))


def _checkpoint_bytes() -> bytes:
    buf = io.BytesIO()
    base = ember.arange(24.0).reshape(4, 6)
    ember.save({"w": base, "v": base[1:, ::2], "i": ember.arange(5), "meta": [1, "two", (3.0, None)],
                "od": OrderedDict(x=ember.ones(2, dtype=ember.bfloat16))}, buf)
    return buf.getvalue()


def test_truncated_files_fail_cleanly():
    data = _checkpoint_bytes()
    cuts = sorted(set(range(1, len(data), 13)) | set(range(len(data) - 40, len(data))))  # 0: EOFError below
    for cut in cuts:
        with pytest.raises(RuntimeError, match="<BytesIO>"):
            ember.load(io.BytesIO(data[:cut]))


def test_truncated_file_on_disk_names_the_file(tmp_path):
    path = tmp_path / "cut.pt"
    path.write_bytes(_checkpoint_bytes()[:300])
    with pytest.raises(RuntimeError, match="cut.pt"):
        ember.load(path)


def test_random_bit_flips_load_or_fail_cleanly():
    data = _checkpoint_bytes()
    rng = random.Random(0)
    failures = 0
    for _ in range(300):
        flipped = bytearray(data)
        pos = rng.randrange(len(flipped))
        flipped[pos] ^= 1 << rng.randrange(8)
        try:
            ember.load(io.BytesIO(bytes(flipped)))
        except RuntimeError:
            failures += 1
    assert failures > 100  # most flips land in CRC-checked records


def test_fuzzed_pickle_streams_load_or_fail_cleanly():
    # Mutate data.pkl itself and re-zip it with a valid CRC: exercises the opcode interpreter.
    src = zipfile.ZipFile(io.BytesIO(_checkpoint_bytes()))
    records = {i.filename.split("/", 1)[1]: src.read(i) for i in src.infolist()}
    pkl = records.pop("data.pkl")
    rng = random.Random(1)
    for _ in range(400):
        mutated = bytearray(pkl)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(mutated))
            choice = rng.random()
            if choice < 0.6:
                mutated[pos] = rng.randrange(256)
            elif choice < 0.8:
                del mutated[pos]
            else:
                mutated.insert(pos, rng.randrange(256))
        try:
            ember.load(zip_with(bytes(mutated), records))
        except RuntimeError:
            pass


@pytest.mark.parametrize("weights_only", [True, False])
def test_empty_file_raises_eof_error_as_torch(tmp_path, weights_only):
    # Programs catch EOFError to tell "nothing saved yet" from a damaged checkpoint.
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    for lib in (torch, ember):
        for source in (path, str(path), io.BytesIO(b"")):
            with pytest.raises(EOFError):
                lib.load(source, weights_only=weights_only)
    with pytest.raises(EOFError, match="empty.pt"):
        ember.load(path)


@pytest.mark.parametrize("data, match", [
    (b"PK\x03\x04" + b"\x00" * 40, "failed reading zip archive"),
    (bytes(range(64)), "failed reading zip archive"),
])
def test_not_a_zip(data, match):
    with pytest.raises(RuntimeError, match=match):
        ember.load(io.BytesIO(data))


@pytest.mark.parametrize("data", [b"not a checkpoint", bytes(range(64))])
def test_bytes_that_are_no_zip_raise_unpickling_error_as_torch(data):
    # PyTorch reads them as a legacy pickle stream and fails with pickle.UnpicklingError.
    with pytest.raises(pickle.UnpicklingError):
        torch.load(io.BytesIO(data))
    with pytest.raises(pickle.UnpicklingError):
        ember.load(io.BytesIO(data))


def test_legacy_torch_format_is_explained():
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="legacy"):
        ember.load(buf)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archive_is_explained():
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="TorchScript"):
        ember.load(buf)


def test_compressed_records_are_refused():
    buf = io.BytesIO()
    ember.save({"t": ember.zeros(100)}, buf)
    src = zipfile.ZipFile(buf)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    out.seek(0)
    with pytest.raises(RuntimeError, match="compressed"):
        ember.load(out)


def test_two_archives_in_one_zip_are_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a/data.pkl", b"\x80\x02N.")
        z.writestr("b/data.pkl", b"\x80\x02N.")
    with pytest.raises(RuntimeError, match="single"):
        ember.load(buf)


def test_any_archive_prefix_is_accepted():
    assert ember.load(zip_with(b"\x80\x02K\x07.", prefix="my_model")) == 7


# -- atomic save ------------------------------------------------------------------------------------

def test_failed_pickling_leaves_previous_file_intact(tmp_path):
    path = tmp_path / "ckpt.pt"
    ember.save({"version": 1}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="lock"):
        ember.save({"a": ember.ones(3), "bad": threading.Lock(), "z": 2}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_failure_while_writing_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    ember.save({"version": 1}, path)
    before = path.read_bytes()
    calls = []
    real = _zipfile_format.ZipWriter.write_record

    def failing(self, name, data):
        calls.append(name)
        if name.startswith("data/"):
            raise OSError("disk full")
        return real(self, name, data)

    monkeypatch.setattr(_zipfile_format.ZipWriter, "write_record", failing)
    with pytest.raises(OSError, match="disk full"):
        ember.save({"a": ember.ones(3)}, path)
    assert "data.pkl" in calls  # the failure really was in the middle of the file
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]
    assert ember.load(path) == {"version": 1}


def test_saved_file_gets_normal_permissions(tmp_path):
    path = tmp_path / "perm.pt"
    ember.save(1, path)
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert (path.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)


def test_bool_bytes_other_than_0_and_1_are_normalized():
    stream = assemble(tensor_call((4,), (1,), storage="BoolStorage"))
    out = ember.load(zip_with(stream, {"data/0": bytes([0, 1, 2, 255])}))
    assert out.tolist() == [False, True, True, True]
    assert bytes(memoryview(out.untyped_storage())) == bytes([0, 1, 1, 1])
    assert out.sum().item() == 3


def test_save_into_missing_folder_is_torchs_runtime_error(tmp_path):
    target = tmp_path / "missing" / "x.pt"
    with pytest.raises(RuntimeError) as expected:
        torch.save(torch.ones(1), str(target))
    with pytest.raises(RuntimeError) as got:
        ember.save(ember.ones(1), str(target))
    assert str(got.value) == str(expected.value)
    assert not (tmp_path / "missing").exists()


def test_damaged_checkpoints_raise_what_torch_raises():
    """Each damage as torch 2.13 raises it: an empty file EOFError; a truncated archive RuntimeError;
    a damaged data.pkl pickle.UnpicklingError (ember's is also a RuntimeError); bytes that are a pickle
    but no checkpoint RuntimeError."""
    import io
    import pickle

    import torch

    import ember

    def damages(lib):
        buf = io.BytesIO()
        lib.save({"a": lib.arange(64.0)}, buf)
        data = buf.getvalue()
        at = data.find(b"data.pkl") + 40
        return {"empty": b"", "truncated": data[: len(data) // 2], "pickle_not_checkpoint": b"\x80\x02K\x05.",
                "pkl_damaged": data[:at] + bytes(20) + data[at + 20:]}

    expected = {"empty": EOFError, "truncated": RuntimeError, "pickle_not_checkpoint": RuntimeError,
                "pkl_damaged": pickle.UnpicklingError}
    for lib in (torch, ember):
        for name, data in damages(lib).items():
            with pytest.raises(expected[name]):
                lib.load(io.BytesIO(data))


def _saved():
    buf = io.BytesIO()
    ember.save({"w": ember.ones(2)}, buf)
    buf.seek(0)
    return buf


def test_bad_destinations_and_locations_raise_as_pytorch():
    import torch

    calls = [
        lambda lib: lib.save(lib.ones(1), io.BytesIO(b"x").getbuffer()),  # no write(): ember's own words
        lambda lib: lib.serialization.add_safe_globals(RuntimeError),  # not a list: iterating it fails
        lambda lib: lib.load(_saved(), map_location="tpu", weights_only=True),  # an unknown location tag
    ]
    for call in calls:
        raised = []
        for lib in (torch, ember):
            with pytest.raises(Exception) as info:
                call(lib)
            raised.append((info.type.__name__, str(info.value)))
        assert raised[1] == raised[0]
