"""Training: the DP-SGD loop every family shares (engine), layers with fast per-sample gradient
norms (layers), the device and what a seed reproduces (device). Timing a fit before it runs is
runs.timing's."""
