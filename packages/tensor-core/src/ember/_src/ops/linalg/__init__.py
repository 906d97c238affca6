"""Linear algebra: matrix products and contractions, LAPACK factorizations, LU and triangular solves."""
