"""``ember.utils.model_zoo``: the old name of ``ember.hub``'s checkpoint download."""

from ember.hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
