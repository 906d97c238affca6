"""``export.load``/``jit.load`` cap what deflated members inflate to (a zip bomb is refused)."""

from __future__ import annotations

import io
import zipfile

import pytest

import ember
from ember.export import SerializationError, _serialize, export, load, save

MIB = 1 << 20


class _Lin(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def _program_bytes(save_fn=None) -> bytes:
    buf = io.BytesIO()
    if save_fn is None:
        save(export(_Lin(), (ember.randn(4, 3),)), buf, extra_files={"meta": "small"})
    else:
        save_fn(buf)
    return buf.getvalue()


def _with_deflated(data: bytes, extra: dict[str, bytes]) -> io.BytesIO:
    """The archive with ``extra`` added as deflated members (a run of zeros deflates ~1000x)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        for name, payload in extra.items():
            dst.writestr(zipfile.ZipInfo(name), payload, compress_type=zipfile.ZIP_DEFLATED)
    out.seek(0)
    return out


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(_serialize, "_INFLATE_SLACK", 1 * MIB)


def test_a_deflated_extra_file_past_the_cap_is_refused_naming_it(small_cap):
    f = _with_deflated(_program_bytes(), {"ember_export/extra/bomb": bytes(8 * MIB)})
    assert len(f.getvalue()) < 64 * 1024  # the bomb is small on disk
    with pytest.raises(SerializationError, match=r"ember_export/extra/bomb: inflates to .*decompression bomb"):
        load(f, extra_files={"bomb": ""})
    f.seek(0)
    ep = load(f, extra_files={"meta": ""})  # not asked for: never inflated, the program loads
    assert ep.module()(ember.ones(4, 3)).shape == (4, 2)


def test_a_header_that_understates_the_size_stops_there_and_names_the_member(small_cap):
    # zipfile inflates no more than the central directory's size; the CRC then fails
    f = _with_deflated(_program_bytes(), {"ember_export/extra/bomb": bytes(8 * MIB)})
    raw = bytearray(f.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as z:
        info = z.getinfo("ember_export/extra/bomb")
    # central directory entry: signature, then file_size at +24 (4 bytes, little-endian)
    cd = raw.find(b"ember_export/extra/bomb", raw.find(b"PK\x01\x02")) - 46
    assert raw[cd:cd + 4] == b"PK\x01\x02" and int.from_bytes(raw[cd + 24:cd + 28], "little") == info.file_size
    raw[cd + 24:cd + 28] = (100).to_bytes(4, "little")
    with pytest.raises(SerializationError, match="Bad CRC-32 for file 'ember_export/extra/bomb'"):
        load(io.BytesIO(bytes(raw)), extra_files={"bomb": ""})


def test_the_cap_counts_all_members_together(small_cap):
    data = _program_bytes()
    half = int(0.7 * (len(data) + 2 * 4096 + MIB))
    f = _with_deflated(data, {"ember_export/extra/a": bytes(half), "ember_export/extra/b": bytes(half)})
    extras = {"a": ""}
    load(f, extra_files=extras)  # each alone is allowed
    assert len(extras["a"]) == half
    f.seek(0)
    with pytest.raises(SerializationError, match="ember_export/extra/b: inflates"):
        load(f, extra_files={"a": "", "b": ""})


def test_deflated_members_under_the_cap_load(small_cap):
    text = "ember " * 50_000  # 300 kB of text, deflated: well under the 1 MiB slack
    f = _with_deflated(_program_bytes(), {"ember_export/extra/notes": text.encode()})
    extras = {"notes": "", "meta": ""}
    load(f, extra_files=extras)
    assert extras == {"notes": text, "meta": "small"}


def test_jit_load_is_capped_too(small_cap):
    m = ember.jit.trace(_Lin(), (ember.randn(4, 3),))
    data = _program_bytes(lambda buf: ember.jit.save(m, buf))
    f = _with_deflated(data, {"ember_export/extra/bomb": bytes(8 * MIB)})
    with pytest.raises(SerializationError, match="ember_export/extra/bomb"):
        ember.jit.load(f, _extra_files={"bomb": ""})


def test_the_default_slack_is_well_above_real_programs():
    assert _serialize._INFLATE_SLACK >= 64 * MIB
