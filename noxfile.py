"""Every developer task for the ember monorepo, one nox session each.

    nox -s wheels        build every package's wheel + sdist into dist/ (incremental)
    nox -s tests         the whole suite (every package + repo-level tests) on the built wheels
    nox -s tensor_core   one package alone, with only its declared dependencies (one session per package)
    nox -s lint          ruff check
    nox -s build         clean release build: sdist first, then the wheel from that sdist
    nox -s bench         run benchmarks/ on the built wheels
    nox -s bigmem        tensors past 2**31 elements (needs several GB of free memory)
    nox -s demo          the main job: install the wheels and train examples/train_digits.py
    nox -s fuzz          the differential fuzzer (ember vs PyTorch) with many examples (hypothesis 'deep')
    nox -s sanitize      tensor-core's tests on an AddressSanitizer + UBSan build of ember._C (slow)
    nox -s distributed_full  distributed's tests with the multi-process runs CI skips (EMBER_TEST_DIST_FULL=1)

Native code is compiled only by `wheels` (and `build`). Every other session `requires` it and
installs the finished wheels, so one nox invocation compiles the extension at most once, and
not at all when the package sources have not changed since the last build (see
docs/packaging.md). Sessions stay on virtualenv + pip: uv does not see the local PyTorch CPU
wheel and would download a multi-GB CUDA build (notes/build-facts.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import nox

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - nox itself may run on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
STAMPS = DIST / ".stamps"

# Compile with one job per core and no more (ninja's default oversubscribes; CI has 2 cores).
JOBS = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
BUILD_ENV = {"CMAKE_BUILD_PARALLEL_LEVEL": JOBS}
# With ccache installed, a build in a fresh clone reuses objects compiled in any other checkout
# (paths under the repository are hashed relative to it); without it nothing changes.
if shutil.which("ccache"):
    BUILD_ENV |= {"CMAKE_CXX_COMPILER_LAUNCHER": "ccache", "CCACHE_BASEDIR": str(ROOT)}

# What the examples need beyond the packages themselves (the progress bar).
EXAMPLE_REQUIREMENTS = ["tqdm"]

nox.options.default_venv_backend = "virtualenv"
# Venvs are reused between runs; wheels are always installed with --force-reinstall, so a
# rebuilt wheel that kept its version number still replaces the old binary.
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_missing_interpreters = True

# Files and folders that never go into a distribution, so they never trigger a rebuild.
IGNORED_PARTS = {"build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", ".nox"}
IGNORED_SUFFIXES = (".so", ".pyd", ".pyc", ".egg-info")


def _load_packages() -> dict[str, dict]:
    """Reads packages/*/pyproject.toml into {distribution name: facts}."""
    packages = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        config = tomllib.loads(pyproject.read_text())
        project = config["project"]
        packages[project["name"]] = {
            "dir": pyproject.parent,
            "version": project["version"],
            "dependencies": project.get("dependencies", []),
            "test_dependencies": project.get("optional-dependencies", {}).get("test", []),
            "build_requires": config["build-system"]["requires"],
        }
    return packages


PACKAGES = _load_packages()


def _requirement_name(requirement: str) -> str:
    """'ember-tensor-core>=0.1; python_version>"3"' -> 'ember-tensor-core'."""
    name = requirement.split(";")[0]
    for stop in "<>=!~[ (":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


def _is_ours(requirement: str) -> bool:
    return _requirement_name(requirement) in PACKAGES


def _closure(names: list[str]) -> list[str]:
    """The given packages plus every ember package they depend on, transitively."""
    seen: list[str] = []
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo += [_requirement_name(r) for r in PACKAGES[name]["dependencies"] if _is_ours(r)]
    return sorted(seen)


def _source_hash(package_dir: Path) -> str:
    """Hash of every file that can end up in the package's wheel or sdist."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir)
        if not path.is_file() or IGNORED_PARTS.intersection(rel.parts):
            continue
        if path.name.endswith(IGNORED_SUFFIXES):
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _dist_files(name: str) -> tuple[list[Path], list[Path]]:
    stem = name.replace("-", "_")
    version = PACKAGES[name]["version"]
    return sorted(DIST.glob(f"{stem}-{version}-*.whl")), sorted(DIST.glob(f"{stem}-{version}.tar.gz"))


def _wheel(name: str) -> Path:
    wheels, _ = _dist_files(name)
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel of {name} in {DIST}, found {wheels}: run `nox -s wheels`")
    return wheels[0]


def _install_packages(session: nox.Session, names: list[str]) -> None:
    """Installs the named packages' wheels from dist/ with their declared and test dependencies.

    Third-party requirements are installed from the index; our own packages only ever come
    from dist/ (--no-deps --force-reinstall), so a stale copy with the same version cannot
    survive in a reused venv.
    """
    names = _closure(names)
    requirements = {"pytest"}
    for name in names:
        facts = PACKAGES[name]
        requirements |= {r for r in facts["dependencies"] + facts["test_dependencies"] if not _is_ours(r)}
    session.install(*sorted(requirements))
    session.install("--no-deps", "--force-reinstall", *[str(_wheel(name)) for name in names])
    session.run("python", "-c", "import ember; print('ember from', ember.__file__)")


def _test_env() -> dict[str, str]:
    # Repo-level packaging tests find the built wheels here (tests/test_namespace.py).
    return {"EMBER_DIST_DIR": str(DIST), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}


@nox.session
def wheels(session: nox.Session) -> None:
    """Builds every package's wheel and sdist into dist/, skipping packages whose sources are unchanged.

    The wheel is built straight from the source folder so scikit-build-core keeps its CMake
    build folder (packages/<name>/build/<wheel tag>) between runs: a C++ edit recompiles only
    the changed files.
    """
    # Build requirements live in this venv (no isolation) so their paths stay the same from
    # run to run; with a fresh isolated env per build, CMake would see new include paths and
    # recompile everything. cmake and ninja come from pip: a fresh machine may have neither.
    build_requires = {"build", "cmake", "ninja"}
    for facts in PACKAGES.values():
        build_requires |= set(facts["build_requires"])
    session.install(*sorted(build_requires))
    STAMPS.mkdir(parents=True, exist_ok=True)
    for name, facts in PACKAGES.items():
        stamp = STAMPS / f"{name}.sha256"
        source_hash = _source_hash(facts["dir"])
        old_wheels, old_sdists = _dist_files(name)
        if stamp.exists() and stamp.read_text() == source_hash and len(old_wheels) == 1 and old_sdists:
            session.log(f"{name}: unchanged since the last build, keeping {old_wheels[0].name}")
            continue
        for old in old_wheels + old_sdists:
            old.unlink()
        for kind in ("--sdist", "--wheel"):
            command = ["python", "-m", "build", "--no-isolation", kind, "-o", str(DIST), str(facts["dir"])]
            session.run(*command, env=BUILD_ENV)
        stamp.write_text(source_hash)


@nox.session(requires=["wheels"])
def tests(session: nox.Session) -> None:
    """The whole suite: every package's tests and the repo-level tests, on all wheels installed together."""
    _install_packages(session, list(PACKAGES))
    test_dirs = [str(f["dir"] / "tests") for f in PACKAGES.values() if (f["dir"] / "tests").is_dir()]
    session.run("python", "-m", "pytest", *test_dirs, "tests", *session.posargs, env=_test_env())


@nox.session(requires=["wheels"])
def bigmem(session: nox.Session) -> None:
    """Tensors past 2**31 elements on real memory (tests marked bigmem; 2-5 GB each, more where memory allows).

    Off in `tests`, where every bigmem test is skipped: EMBER_TEST_BIGMEM=1 turns them on here.
    """
    _install_packages(session, ["ember-tensor-core"])
    test_dir = str(PACKAGES["ember-tensor-core"]["dir"] / "tests")
    env = {**_test_env(), "EMBER_TEST_BIGMEM": "1"}
    session.run("python", "-m", "pytest", test_dir, "-m", "bigmem", *session.posargs, env=env)


def _make_package_session(name: str) -> None:
    """Defines `nox -s <name without ember->`: the package alone with only its declared dependencies."""
    test_dir = PACKAGES[name]["dir"] / "tests"

    def session_fn(session: nox.Session) -> None:
        _install_packages(session, [name])
        session.run("python", "-m", "pytest", str(test_dir), *session.posargs, env=_test_env())

    session_fn.__doc__ = f"{name} alone: its wheel, its declared dependencies, pytest, torch; runs its tests."
    short = name.removeprefix("ember-").replace("-", "_")
    nox.session(name=short, requires=["wheels"])(session_fn)


for _name, _facts in PACKAGES.items():
    if (_facts["dir"] / "tests").is_dir():
        _make_package_session(_name)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the whole repository (configuration in the top-level pyproject.toml)."""
    session.install("ruff")
    session.run("ruff", "check", str(ROOT), *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Clean release build of every package: the sdist, then the wheel built from that sdist.

    Building from the sdist proves it holds everything (csrc/, CMakeLists.txt, ...). Slower
    than `wheels` (a cold compile); it replaces what is in dist/ and refreshes the stamps.
    """
    session.install("build", "virtualenv")
    STAMPS.mkdir(parents=True, exist_ok=True)
    for name, facts in PACKAGES.items():
        for old in sum(_dist_files(name), []):
            old.unlink()
        session.run("python", "-m", "build", "--outdir", str(DIST), str(facts["dir"]), env=BUILD_ENV)
        (STAMPS / f"{name}.sha256").write_text(_source_hash(facts["dir"]))


@nox.session(requires=["wheels"])
def bench(session: nox.Session) -> None:
    """Runs every benchmarks/*.py script (ember and PyTorch side by side) on the built wheels."""
    scripts = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    if not scripts:
        session.skip("benchmarks/ has no scripts yet")
    _install_packages(session, list(PACKAGES))
    for script in scripts:
        session.run("python", str(script), *session.posargs)


@nox.session(requires=["wheels"])
def demo(session: nox.Session) -> None:
    """The main job: installs the built wheels and trains the digits CNN (examples/train_digits.py)."""
    names = _closure(["ember"] if "ember" in PACKAGES else list(PACKAGES))
    session.install("--no-deps", "--force-reinstall", *[str(_wheel(name)) for name in names])
    deps = {r for name in names for r in PACKAGES[name]["dependencies"] if not _is_ours(r)}
    session.install(*sorted(deps), *EXAMPLE_REQUIREMENTS)
    session.run("python", str(ROOT / "examples" / "train_digits.py"), *session.posargs)


FUZZ_TESTS = ["packages/tensor-core/tests/test_fuzz_ops.py"]


@nox.session(requires=["wheels"])
def fuzz(session: nox.Session) -> None:
    """The differential fuzz suite with the 'deep' hypothesis profile: far more examples than CI.

    `nox -s fuzz -- -k add` narrows it; EMBER_FUZZ_PROFILE=ci|dev|deep overrides the profile.
    """
    _install_packages(session, list(PACKAGES))
    env = {**_test_env(), "EMBER_FUZZ_PROFILE": os.environ.get("EMBER_FUZZ_PROFILE", "deep")}
    session.run("python", "-m", "pytest", *[str(ROOT / t) for t in FUZZ_TESTS], *session.posargs, env=env)


@nox.session(requires=["wheels"])
def fuzz100k(session: nox.Session) -> None:
    """The seeded 100,000-case differential fuzz run (outside CI; CI runs a derandomized ~3,700-case slice).

    324 hypothesis examples for each op and gradient test of the fuzz suite; EMBER_FUZZ_SEED (default
    17) seeds hypothesis so a failure reproduces with the same seed. Session 4 (311 tests, 100,764
    cases): 73 min wall in 10 sequential shards on a shared 2-core machine (`-- -k ...` shards it).
    """
    _install_packages(session, list(PACKAGES))
    env = {**_test_env(), "EMBER_FUZZ_PROFILE": "100k"}
    seed = os.environ.get("EMBER_FUZZ_SEED", "17")
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
                "--hypothesis-show-statistics", *[str(ROOT / t) for t in FUZZ_TESTS], *session.posargs, env=env)


@nox.session(requires=["wheels"])
def distributed_full(session: nox.Session) -> None:
    """distributed's tests with EMBER_TEST_DIST_FULL=1: the 4- and 8-process PyTorch-oracle runs and
    the user programs CI leaves out (its 2 cores and 30 minutes); `-- -k user_programs` for those alone."""
    _install_packages(session, list(PACKAGES))
    env = {**_test_env(), "EMBER_TEST_DIST_FULL": "1"}
    session.run("python", "-m", "pytest", str(ROOT / "packages/distributed/tests"), *session.posargs, env=env)


OPDB_TESTS = ["packages/tensor-core/tests/test_opdb_forward.py", "packages/tensor-core/tests/test_opdb_complete.py",
              "packages/autograd/tests/test_opdb_autograd.py", "packages/nn/tests/test_opdb_nn.py"]


@nox.session(requires=["wheels"])
def opdb(session: nox.Session) -> None:
    """The op database's generic tests over every dtype (EMBER_OPDB_FULL=1); CI runs them on three dtypes."""
    _install_packages(session, list(PACKAGES))
    env = {**_test_env(), "EMBER_OPDB_FULL": "1"}
    session.run("python", "-m", "pytest", *[str(ROOT / t) for t in OPDB_TESTS], *session.posargs, env=env)


# What `nox -s sanitize` runs by default: the tests that drive ember._C's kernels hardest. Covered:
# every op's forward kernels over its sample inputs (test_opdb_forward: dtypes, empty, 0-d, broadcast,
# non-contiguous, storage offsets), indexing/index_put/advanced indexing, scatter/gather/index_* and
# their view forms, strided and overlapping copies, reductions, sorting, LAPACK/BLAS, convolution and
# pooling kernels, huge-stride and >2**31 index arithmetic, serialization's zip reader and hostile
# checkpoints, DLPack/NumPy/buffer interop and hostile inputs. Not covered: autograd (the C engine is
# exercised only through these ops), nn modules, compile/inductor's generated C, distributed, CUDA.
# Sized for 30 minutes on a 2-core machine: these tests take 4 min on one core on a normal build
# (7,230 tests, measured on the shared session machine), so 2 workers under the sanitizers' slowdown
# leave room for the sanitized build (37 files; seconds when ccache is warm, ci/sanitize_build.sh).
# Not yet timed end to end: in session 4 the cold sanitized build did not finish on the shared machine.
# `-- packages/tensor-core/tests` runs everything (hours on 2 cores; ~3 min with -n 16).
SANITIZE_TESTS = [
    "test_opdb_forward.py", "test_indexing.py", "test_hostile_inputs.py", "test_memory_overlap.py",
    "test_scatter_views_api.py", "test_scatter.py", "test_index_utils_api.py", "test_interop.py",
    "test_serialization_roundtrip.py", "test_serialization_safety.py", "test_issue17_serialization.py",
    "test_reductions.py", "test_sorting.py", "test_linalg_lapack.py", "test_views.py", "test_conv.py",
    "test_pool.py", "test_big_tensors.py", "test_issue17_core_fixes.py",
]


@nox.session
def sanitize(session: nox.Session) -> None:
    """tensor-core's test suite on ember._C built with -fsanitize=address,undefined.

    ci/sanitize_build.sh builds in-tree into packages/tensor-core/build/sanitize (CMake option
    EMBER_SANITIZE) and stages a copy of the package there, so the wheels and the dev build are
    untouched. Python is not built with ASan, so libasan is preloaded; leak checking is off
    (the interpreter leaks by design) and UBSan stops at its first report. Slow: a cold build
    takes many minutes on 2 cores, and the tests run several times slower; pass a subset with
    `nox -s sanitize -- packages/tensor-core/tests/test_indexing.py`, or spread them over a big
    machine's cores with `nox -s sanitize -- -n 16 packages/tensor-core/tests` (pytest-xdist).
    `EMBER_BUILD_JOBS` sets the build's parallelism (default 2), `EMBER_SANITIZE_WORKERS` the
    pytest-xdist workers of the default test list (default 2). What the default list covers, and
    what it leaves out, is written above SANITIZE_TESTS.
    """
    core = PACKAGES["ember-tensor-core"]
    requirements = {"cmake", "ninja", "pytest"} | set(core["build_requires"]) | set(core["dependencies"])
    requirements |= set(core["test_dependencies"]) | {"pytest-xdist"}
    session.install(*sorted(r for r in requirements if not _is_ours(r) and "scikit-build" not in r))
    out = session.run("bash", str(ROOT / "ci" / "sanitize_build.sh"), "python", silent=True, external=True)
    site = out.strip().splitlines()[-1]
    # libstdc++ is preloaded too: the interpreter does not link it, and without it ASan cannot find
    # the real __cxa_throw (every C++ exception then aborts in its interceptor).
    preload = [session.run("gcc", f"-print-file-name={lib}", silent=True, external=True).strip()
               for lib in ("libasan.so", "libstdc++.so")]
    env = {
        **_test_env(),
        "PYTHONPATH": site,
        "LD_PRELOAD": " ".join(preload),
        # allocator_may_return_null: a huge allocation must reach ember's own out-of-memory error
        # (test_hostile_inputs) instead of aborting in ASan.
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }
    tests_dir = core["dir"] / "tests"
    workers = os.environ.get("EMBER_SANITIZE_WORKERS", "2")
    targets = session.posargs or ["-n", workers, *[str(tests_dir / t) for t in SANITIZE_TESTS
                                                   if (tests_dir / t).exists()]]
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *targets, env=env)


@nox.session(python=False)
def clean(session: nox.Session) -> None:
    """Removes dist/ and every package's build folder (the next `wheels` compiles from scratch)."""
    for path in [DIST, *(facts["dir"] / "build" for facts in PACKAGES.values())]:
        if path.exists():
            session.log(f"removing {path}")
            shutil.rmtree(path)
