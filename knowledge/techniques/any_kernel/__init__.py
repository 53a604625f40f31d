"""Techniques for any Triton kernel, found by its syntax rather than by regions (``_syntax`` reads
kernels, launches and the constants behind them): block-size constants and the launch's
``num_warps`` and ``num_stages`` (``launch``), elements per thread of an elementwise kernel
(``vector``), per-shape tuning inside the submission (``tuning``), cache and eviction hints
(``cache_hints``), rows per program and a persistent grid (``rows``), dropping a PyTorch
fallback (``fallback``), two elementwise launches fused into one (``fusion``), a one-program
looping 1-D scan made block-parallel (``scan``), a one-program looping full reduction split over
every SM (``reduce``), and a library matrix product made a Triton kernel of the file
(``library_mm``)."""
