"""``torch.distributed.constants``: the default collective timeout."""

from ._world import default_pg_timeout  # noqa: F401 - re-exported
