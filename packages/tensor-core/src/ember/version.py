"""``ember.version``: build facts, as ``torch.version`` (``cuda`` is None: this build has no CUDA
toolkit linked; the CUDA plugin reports its own through ``ember.cuda``)."""

from ember.torch_version import TorchVersion

__version__ = TorchVersion("0.1.0")
git_version = "unknown"  # not recorded at build time
debug = False
cuda = None
hip = None
rocm = None
xpu = None

__all__ = ["__version__", "cuda", "debug", "git_version", "hip", "rocm", "xpu"]
