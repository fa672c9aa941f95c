"""diag: why an LLM inference workload is slow or broken on Ascend NPUs, and how it differs from CUDA."""

__version__ = "0.1.0"
