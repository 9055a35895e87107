"""Helpers every room uses: input checks, convergence reports, the interrupt flag.

- :mod:`.validation`: value ranges the training arithmetic holds, sample weights, the
  fit parameters a path passes on (and their rows of a subsample), warm-start
  compatibility of targets (numpy only);
- :mod:`.columns`: column statistics of dense or sparse ``X`` (sums of squares, means and
  variances; numpy/scipy only);
- :mod:`.convergence`: :func:`~.convergence.warn_convergence`, how every fit of the
  package says it did not converge, and the per-thread collection a path uses;
- :mod:`.interrupt`: the flag file that forwards a Ctrl-C to a path's workers;
- :mod:`.threads`: :func:`~.threads.torch_threads`, torch's intra-op threads for a block;
- :mod:`.digest`: :func:`~.digest.array_key`, whether an array still holds the values
  it had, without holding a copy (numpy only).
"""
