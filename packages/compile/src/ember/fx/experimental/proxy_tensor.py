"""``make_fx`` under PyTorch's ``torch.fx.experimental.proxy_tensor`` name (it lives in ember.compiler)."""

from ember.compiler._make_fx import make_fx

__all__ = ["make_fx"]
