"""ember.hub without a network: hubconf.py entry points from a local directory, checkpoints from
file:// URLs (cached once, hash-checked), download_url_to_file, and the hub directory settings."""

import hashlib
import os

import pytest

import ember


@pytest.fixture()
def hub_dir(tmp_path):
    old = ember.hub.get_dir()
    ember.hub.set_dir(tmp_path / "hub")
    yield tmp_path / "hub"
    ember.hub.set_dir(old)


def test_local_hubconf(tmp_path, hub_dir):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "helper.py").write_text("SCALE = 3\n")
    (repo / "hubconf.py").write_text(
        "dependencies = ['ember']\n"
        "from helper import SCALE\n"
        "import ember\n"
        "def tiny(n=2, *, fill=1.0):\n"
        "    '''A tiny model.'''\n"
        "    return ember.full((n,), fill * SCALE)\n"
        "def _private():\n"
        "    pass\n")
    assert ember.hub.list(str(repo), source="local") == ["tiny"]
    assert ember.hub.help(str(repo), "tiny", source="local") == "A tiny model."
    assert ember.hub.load(str(repo), "tiny", 3, source="local", fill=2.0).tolist() == [6.0, 6.0, 6.0]
    with pytest.raises(RuntimeError, match="Cannot find callable"):
        ember.hub.load(str(repo), "nothing", source="local")
    with pytest.raises(ValueError, match="Unknown source"):
        ember.hub.load(str(repo), "tiny", source="gitlab")
    (repo / "hubconf.py").write_text("dependencies = ['no_such_package_xyz']\n")
    with pytest.raises(RuntimeError, match="Missing dependencies"):
        ember.hub.load(str(repo), "tiny", source="local")
    with pytest.raises(ValueError, match="Invalid input"):
        ember.hub.load("not-a-repo", "tiny", trust_repo=True)


def test_load_state_dict_from_url_caches_and_checks_hash(tmp_path, hub_dir):
    state = {"w": ember.arange(4.0), "b": ember.ones(2)}
    src = tmp_path / "weights.pt"
    ember.save(state, src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = tmp_path / f"model-{digest[:8]}.pt"
    os.replace(src, named)
    got = ember.hub.load_state_dict_from_url(named.as_uri(), check_hash=True, weights_only=True)
    assert got["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and got["b"].tolist() == [1.0, 1.0]
    cached = hub_dir / "checkpoints" / named.name
    assert cached.exists()
    os.remove(named)  # the second call reads the cache
    assert ember.hub.load_state_dict_from_url(named.as_uri())["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    bad = tmp_path / "model-deadbeef.pt"
    ember.save(state, bad)
    with pytest.raises(RuntimeError, match="invalid hash value"):
        ember.hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "other"), check_hash=True)
    assert not (tmp_path / "other" / bad.name).exists()  # nothing half-written is left in the cache


def test_download_url_to_file_and_dirs(tmp_path, hub_dir, monkeypatch):
    src = tmp_path / "data.bin"
    src.write_bytes(b"ember" * 1000)
    dst = tmp_path / "copy.bin"
    ember.hub.download_url_to_file(src.as_uri(), str(dst), hash_prefix=hashlib.sha256(src.read_bytes()).hexdigest()[:6])
    assert dst.read_bytes() == src.read_bytes()
    assert ember.hub.get_dir() == str(hub_dir)
    ember.hub.set_dir(str(tmp_path / "x"))
    assert ember.hub.get_dir() == str(tmp_path / "x")
    monkeypatch.setattr(ember.hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    assert ember.hub.get_dir() == str(tmp_path / "home" / "hub")
