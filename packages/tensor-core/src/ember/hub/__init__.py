"""``ember.hub``: load models published as a ``hubconf.py`` (from a GitHub repository or a local
directory) and checkpoints published at a URL, as ``torch.hub``.

The cache lives under ``get_dir()``: ``$EMBER_HOME/hub`` when set, else ``$TORCH_HOME/hub``, else
``$XDG_CACHE_HOME/ember/hub`` (``~/.cache/ember/hub``); ``set_dir`` overrides it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings

# zipfile (with bz2, lzma), shutil, tempfile and urllib.parse are imported where used: only a
# download or an archive needs them, and they were a fifth of `import ember` (issue 18: < 0.1 s).

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
READ_DATA_CHUNK = 128 * 1024
_hub_dir: str | None = None
_HASH_RE = re.compile(r"-([a-f0-9]*)\.")
HASH_REGEX = _HASH_RE  # PyTorch's public name of the checkpoint file-name hash pattern
ENV_GITHUB_TOKEN = "GITHUB_TOKEN"
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"


def _check_module_exists(name: str) -> bool:
    """Whether ``import name`` would find a module (hubconf dependency checks)."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _get_torch_home() -> str:
    """``$TORCH_HOME``, else ``$XDG_CACHE_HOME/torch`` (``~/.cache/torch``), as PyTorch's. ember's own
    cache (``get_dir()``) prefers ``$EMBER_HOME`` and lives under ``ember`` (docs/deviations.md)."""
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(os.getenv(ENV_XDG_CACHE_HOME,
                                                                               DEFAULT_CACHE_DIR), "torch")))


def get_dir() -> str:
    if _hub_dir is not None:
        return _hub_dir
    for var in ("EMBER_HOME", "TORCH_HOME"):
        if os.getenv(var):
            return os.path.join(os.path.expanduser(os.getenv(var)), "hub")
    cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return os.path.join(os.path.expanduser(cache), "ember", "hub")


def set_dir(d) -> None:
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Downloads ``url`` to ``dst`` through a temporary file in the same directory (renamed into
    place when complete); with ``hash_prefix``, the SHA-256 digest must start with it."""
    # Imported here: urllib.request (with http.client, ssl, email) and hashlib (OpenSSL) are a fifth
    # of `import ember` and only a download needs them.
    import hashlib
    import shutil
    import tempfile
    import urllib.request

    dst = os.path.expanduser(dst)
    req = urllib.request.Request(url, headers={"User-Agent": "ember.hub"})
    with urllib.request.urlopen(req) as u:  # noqa: S310 - a user-given URL, as torch.hub
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".", suffix=".partial",
                                   dir=os.path.dirname(os.path.abspath(dst)))
        try:
            sha = hashlib.sha256()
            with os.fdopen(fd, "wb") as f:
                while chunk := u.read(READ_DATA_CHUNK):
                    f.write(chunk)
                    sha.update(chunk)
            if hash_prefix is not None:
                digest = sha.hexdigest()
                if digest[: len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
            shutil.move(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None, weights_only: bool = False):
    """Downloads a checkpoint once into ``model_dir`` (default ``get_dir()/checkpoints``) and loads it
    with ``ember.load``; ``check_hash`` checks the hex digits after the last '-' of the file name
    against its SHA-256, as PyTorch's naming convention says."""
    import zipfile
    from urllib.parse import urlparse

    import ember

    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else model_dir
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        match = _HASH_RE.search(filename) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress=progress)
    if zipfile.is_zipfile(cached) and not _is_checkpoint_zip(cached):
        with zipfile.ZipFile(cached) as z:  # the legacy format: one checkpoint zipped
            members = z.infolist()
            if len(members) != 1:
                raise RuntimeError("Only one file(not dir) is allowed in the zipfile")
            z.extractall(model_dir)
            cached = os.path.join(model_dir, members[0].filename)
    return ember.load(cached, map_location=map_location, weights_only=weights_only)


def _is_checkpoint_zip(path: str) -> bool:
    import zipfile

    with zipfile.ZipFile(path) as z:
        return any(n.endswith("data.pkl") for n in z.namelist())


# -- hubconf repositories -----------------------------------------------------------------------

def _parse_repo_info(github: str):
    repo_info, _, ref = github.partition(":")
    owner, _, name = repo_info.partition("/")
    if not owner or not name:
        raise ValueError(f'Invalid input: {github}. Expected format "repo_owner/repo_name[:ref]"')
    return owner, name, ref or "main"


def _trusted_list_path() -> str:
    return os.path.join(get_dir(), "trusted_list")


def _check_trust(owner: str, name: str, trust_repo) -> None:
    if trust_repo is True:
        _trust(owner, name)
        return
    path = _trusted_list_path()
    trusted = set(open(path).read().split()) if os.path.exists(path) else set()
    key = f"{owner}_{name}".lower()
    if key in trusted or owner.lower() == "pytorch":
        return
    if trust_repo is None:
        warnings.warn("You are about to download and run code from an untrusted repository. In a future release, "
                      "this won't be allowed. To add the repository to your trusted list, change the command to "
                      "{calling_fn}(..., trust_repo=False) and a command prompt will appear asking for an explicit "
                      "confirmation of trust, or load(..., trust_repo=True), which will assume that the prompt is "
                      "to be answered with 'yes'. You can also use load(..., trust_repo='check') which will only "
                      "prompt for confirmation if the repo is not already trusted. This will eventually be the "
                      "default behaviour", stacklevel=3)
        return
    answer = input(f"The repository {owner}/{name} does not belong to the list of trusted repositories and as such "
                   "cannot be downloaded. Do you trust this repository and wish to add it to the trusted list of "
                   "repositories (y/N)?")
    if answer.lower() not in ("y", "yes"):
        raise Exception("Untrusted repository.")  # noqa: TRY002 - PyTorch's exception type
    _trust(owner, name)


def _trust(owner: str, name: str) -> None:
    os.makedirs(get_dir(), exist_ok=True)
    with open(_trusted_list_path(), "a") as f:
        f.write(f"{owner}_{name}\n".lower())


def _get_cache_or_reload(github: str, force_reload: bool, trust_repo, verbose: bool = True) -> str:
    import shutil
    import zipfile

    owner, name, ref = _parse_repo_info(github)
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    repo_dir = os.path.join(hub_dir, "_".join([owner, name, ref.replace("/", "_")]))
    _check_trust(owner, name, trust_repo)
    if os.path.exists(repo_dir) and not force_reload:
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    archive = os.path.join(hub_dir, f"{ref.replace('/', '_')}.zip")
    download_url_to_file(f"https://github.com/{owner}/{name}/zipball/{ref}", archive, progress=False)
    with zipfile.ZipFile(archive) as z:
        top = z.infolist()[0].filename.split("/")[0]
        shutil.rmtree(os.path.join(hub_dir, top), ignore_errors=True)
        z.extractall(hub_dir)
    os.remove(archive)
    shutil.rmtree(repo_dir, ignore_errors=True)
    shutil.move(os.path.join(hub_dir, top), repo_dir)
    return repo_dir


def _import_hubconf(repo_dir: str):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Cannot find {MODULE_HUBCONF} in {repo_dir}")
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location("hubconf", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    missing = [d for d in getattr(module, VAR_DEPENDENCY, []) if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _entrypoint(module, model: str):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def _repo_dir(repo_or_dir: str, source: str, force_reload: bool, trust_repo, verbose: bool) -> str:
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        return _get_cache_or_reload(repo_or_dir, force_reload, trust_repo, verbose)
    return repo_or_dir


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, *, source="github"):  # noqa: A001
    """The entry points a repository's ``hubconf.py`` defines."""
    module = _import_hubconf(_repo_dir(github, source, force_reload, trust_repo, verbose))
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, *, source="github"):  # noqa: A001
    """The docstring of an entry point."""
    module = _import_hubconf(_repo_dir(github, source, force_reload, trust_repo, True))
    return _entrypoint(module, model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """Calls ``model`` from the ``hubconf.py`` of a GitHub repository (``"owner/name[:ref]"``) or, with
    ``source="local"``, of a directory, with ``*args``/``**kwargs``."""
    module = _import_hubconf(_repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose))
    return _entrypoint(module, model)(*args, **kwargs)


