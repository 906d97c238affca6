"""``ember.distributed.tensor``: ``DTensor`` with ``Shard``/``Replicate``/``Partial`` placements,
operators on DTensors by sharding propagation (``_dispatch``, ``_rules``), ``distribute_tensor``
``distribute_module`` and the factories (``ones``, ``zeros``, ``empty``, ``full``, ``rand``,
``randn`` with ``device_mesh``/``placements``)."""

from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import distribute_module
from ._dispatch import install as _install
from ._dtensor import DTensor, distribute_tensor
from ._factories import empty, full, ones, rand, randn, zeros
from ._placements import Partial, Placement, Replicate, Shard

_install()

__all__ = ["DTensor", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard", "distribute_module",
           "distribute_tensor", "empty", "full", "init_device_mesh", "ones", "rand", "randn", "zeros"]
