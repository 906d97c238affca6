"""AOT compilation (torch._inductor.aoti_compile_and_package / aoti_load_package, torch._export.aot_compile):
packages built from exported programs, run without the model's source, equal to eager."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile

import pytest

import ember
from ember._export import aot_compile, aot_load
from ember._inductor import AOTICompiledModel, aoti_compile_and_package, aoti_load_package
from ember.export import SerializationError, export

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the package embeds data with .incbin")


def _models():
    import export_models as em

    ember.manual_seed(0)
    return [("mlp", em.mlp(ember), ember.randn(4, 6)), ("cnn", em.cnn(ember).eval(), ember.randn(2, 1, 8, 8)),
            ("mini_gpt", em.mini_gpt(ember).eval(), ember.randint(0, 50, (2, 8)))]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_package_runs_like_eager(index, tmp_path):
    name, model, x = _models()[index]
    ep = export(model, (x,))
    path = aoti_compile_and_package(ep, package_path=str(tmp_path / f"{name}.pt2"))
    assert path.endswith(".pt2") and zipfile.is_zipfile(path)
    compiled = aoti_load_package(path)
    assert isinstance(compiled, AOTICompiledModel)
    with ember.no_grad():
        want = model(x)
    ember.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
    assert compiled.get_constant_fqns() == [s.target for s in ep.graph_signature.input_specs
                                            if s.kind.name != "USER_INPUT"]
    # The C runtime checks static sizes itself; the plan interpreter (CNN) checks shapes in Python.
    with pytest.raises(RuntimeError, match=r"size 0 must be \d+|compiled for a cpu tensor of shape"):
        compiled(ember.cat([x, x]))


def test_package_loads_in_a_process_without_the_model_source(tmp_path):
    class Secret(ember.nn.Module):  # defined here only: the loading process never sees this class
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(5, 3)

        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda v: self.lin(v).softmax(-1), lambda v: self.lin(-v).tanh(), (x,))

    model = Secret()
    x = ember.randn(2, 5)
    path = aoti_compile_and_package(export(model, (x,)), package_path=str(tmp_path / "secret.pt2"))
    ember.save({"x": x, "pos": model(x.abs()).detach(), "neg": model(-x.abs()).detach()}, str(tmp_path / "io.pt"))
    script = (
        "import sys, ember\n"
        "from ember._inductor import aoti_load_package\n"
        f"m = aoti_load_package({path!r})\n"
        f"d = ember.load({str(tmp_path / 'io.pt')!r})\n"
        "ember.testing.assert_close(m(d['x'].abs()), d['pos'])\n"
        "ember.testing.assert_close(m(-d['x'].abs()), d['neg'])\n"
        "print('ok', 'Secret' not in sys.modules)\n")
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok True"


def test_load_constants_file_objects_and_aot_compile(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))
    x = ember.randn(3, 4)
    buf = io.BytesIO()
    aoti_compile_and_package(export(model, (x,)), package_path=buf)
    buf.seek(0)
    compiled = aoti_load_package(buf)
    other = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))
    compiled.load_constants(dict(other.state_dict()), check_full_update=True)
    with ember.no_grad():
        ember.testing.assert_close(compiled(x), other(x))
    with pytest.raises(RuntimeError, match="missing constants"):
        compiled.load_constants({"0.weight": other[0].weight}, check_full_update=True)
    so_path = aot_compile(model, (x,), options={"aot_inductor.output_path": str(tmp_path)})
    assert so_path.endswith(".so") and os.path.exists(so_path)
    with ember.no_grad():
        ember.testing.assert_close(aot_load(so_path, "cpu")(x), model(x))


def test_bad_packages_and_paths_are_refused(tmp_path):
    ep = export(ember.nn.Linear(2, 2), (ember.randn(1, 2),))
    with pytest.raises(ValueError, match=".pt2"):
        aoti_compile_and_package(ep, package_path=str(tmp_path / "model.zip"))
    with pytest.raises(ValueError, match="ExportedProgram"):
        aoti_compile_and_package(ember.nn.Linear(2, 2))
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(SerializationError, match="not an AOT package"):
        aoti_load_package(str(bad))
    with zipfile.ZipFile(tmp_path / "empty.pt2", "w") as z:
        z.writestr("something.txt", "x")
    with pytest.raises(SerializationError, match="model.so missing"):
        aoti_load_package(str(tmp_path / "empty.pt2"))
