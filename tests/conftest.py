"""Test-session settings: headless plotting, one torch thread (tiny tensors, shared CPUs)."""

import matplotlib
import torch

matplotlib.use("Agg")
torch.set_num_threads(1)
