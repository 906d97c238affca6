"""Every layer, in one file per family; ``ember.nn`` re-exports them all."""

from .container import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
