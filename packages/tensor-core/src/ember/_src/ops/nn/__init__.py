"""Neural-network kernels: attention, convolution, losses, embedding/dropout, normalization,
pooling, resampling, recurrent cells."""
