"""Every layer, in one file per family; ``ember.nn`` re-exports them all."""

from .batchnorm import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
