"""Op families, one subfolder each. Importing this package declares every op in ``dispatch.OPS``
and its record in ``optable.RECORDS``."""
# isort: skip_file

from .pointwise import closeness, elementwise  # noqa: F401
from .creation import factories  # noqa: F401
from .indexing import gather_scatter, sorting, subscripts  # noqa: F401
from .shape import joining, reorder, views  # noqa: F401
from .linalg import lapack, products  # noqa: F401  (products before contract: contract imports it)
from .nn import activation_grads, attention, attention_flash, conv, embedding_dropout, loss, norm, pool, resample, rnn  # noqa: F401
from .nn import aten_entry_points, rnn_entry, tbc_permuted  # noqa: F401
from .random import samplers  # noqa: F401
from .reduction import reduce  # noqa: F401

# These import the families above.
from .indexing import combinatorics, indices  # noqa: F401
from .pointwise import complex, fused, number_theory, special, special_more  # noqa: F401
from .linalg import contract, eig_ldl, lowrank, solves  # noqa: F401
from .creation import buffers  # noqa: F401
from .spectral import fft, signal  # noqa: F401
from . import inplace_variants, introspection  # noqa: F401
from .reduction import composite, histogramdd, integration, segment, statistics  # noqa: F401
from .random import counting  # noqa: F401
from .shape import splits, view_copies, view_scatters  # noqa: F401
from .optim import fused as optim_fused  # noqa: F401
