"""Shape ops: views and their copies/scatters, splits, joining and reordering."""
