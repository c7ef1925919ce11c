"""numba-cuda's ``numba.cuda._internal`` modules that user code imports (``cuda_bf16``)."""
