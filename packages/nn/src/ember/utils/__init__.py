"""``ember.utils``: shared by distributions (``ember-nn`` ships ``data`` and ``checkpoint``).

Extending ``__path__`` keeps this folder open to ``ember.utils.<name>`` modules from other
distributions in every install mode (notes/build-facts.md).
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)
