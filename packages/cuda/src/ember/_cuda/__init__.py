"""ember-cuda: the CUDA device for ember (a plugin of the tensor core).

Users never import this package: ``ember.cuda`` and ``device="cuda"`` find it through the
``ember.plugins`` entry point "cuda" (``_plugin.plugin``). Nothing here touches the driver
until a CUDA call is made.
"""
