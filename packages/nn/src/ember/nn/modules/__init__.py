"""Every layer, in one file per family; ``ember.nn`` re-exports them all."""

from . import activation as _activation
from . import batchnorm as _batchnorm
from . import instancenorm as _instancenorm
from . import pooling as _pooling
from . import utils as _utils_module  # noqa: F401  (torch.nn.modules.utils)
from .activation import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .channelshuffle import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .fractional import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .lazy_norm import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .linear_cross_entropy import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .pooling3d import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403

# PyTorch's module paths: programs import layers from the file PyTorch defines them in
# (`nn.modules.activation.MultiheadAttention`), which in ember is sometimes another file.
_activation.MultiheadAttention = MultiheadAttention  # noqa: F405
for _name in ("LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"):
    setattr(_batchnorm, _name, globals()[_name])
for _name in ("LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"):
    setattr(_instancenorm, _name, globals()[_name])
for _name in ("FractionalMaxPool2d", "FractionalMaxPool3d", "MaxPool3d", "MaxUnpool3d",
               "AvgPool3d", "LPPool3d", "AdaptiveMaxPool3d", "AdaptiveAvgPool3d"):
    setattr(_pooling, _name, globals()[_name])
del _name

# `ember.nn` star-imports this package: export the layers, not the submodules (a submodule
# named `utils` would shadow `ember.nn.utils`).
__all__ = [name for name, value in dict(globals()).items()
           if not name.startswith("_") and not isinstance(value, type(__import__("sys")))]
