"""``ember.autograd``: reverse- and forward-mode automatic differentiation."""
