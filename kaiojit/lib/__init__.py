"""Library kernels written in kaiojit."""
