"""ember.fx.experimental: tools that build on ember.fx (``proxy_tensor.make_fx`` lives here)."""
