"""Op families. Importing this package declares every op in ``dispatch.OPS`` and its record in
``optable.RECORDS``."""
# isort: skip_file

from . import (  # noqa: F401
    comparison,
    creation,
    indexing,
    joining,
    lapack,
    linalg,
    nn_attention,
    nn_attention_flash,
    nn_conv,
    nn_loss,
    nn_misc,
    nn_norm,
    nn_pool,
    nn_resample,
    nn_rnn,
    pointwise,
    random,
    reduction,
    reorder,
    scatter,
    sorting,
    views,
)

# These import the families above (contract needs linalg first: keep this order).
from . import (  # noqa: F401
    combinatorics,
    complex,
    contract,
    creation_extra,
    fft,
    fused_pointwise,
    index_utils,
    inplace_variants,
    integration,
    lapack_extra,
    number_theory,
    optim_fused,
    reduction_composite,
    sampling,
    scatter_views,
    shape_utils,
    signal,
    special_fns,
    statistics,
    tensor_utils,
    view_copies,
)
