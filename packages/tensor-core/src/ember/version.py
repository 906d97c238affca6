"""``ember.version``: build facts, as ``torch.version``.

``__version__`` is the PyTorch API level ember implements with ember's own release as the local
part (``2.13.0+ember0.1.0``): programs gate features on ``torch.__version__ >= "2.0"`` or
``packaging.version.parse(torch.__version__)``, and with ember's own ``0.1.0`` they took the code
paths written for PyTorch 0.x. ``ember_version`` is ember's release alone (docs/deviations.md).
``cuda`` is None: this build has no CUDA toolkit linked; the CUDA plugin reports its own through
``ember.cuda``."""

from ember.torch_version import TorchVersion

ember_version = "0.1.0"  # the ember-tensor-core release (its pyproject's version)
torch_api_version = "2.13.0"  # the PyTorch release whose public API ember follows
__version__ = TorchVersion(f"{torch_api_version}+ember{ember_version}")
git_version = "unknown"  # not recorded at build time
debug = False
cuda = None
hip = None
rocm = None
xpu = None

__all__ = ["__version__", "cuda", "debug", "ember_version", "git_version", "hip", "rocm", "torch_api_version", "xpu"]
