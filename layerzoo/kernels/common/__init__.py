"""What every kernel family shares, one idea a module: choosing a backend and when Triton may run
(`backends`), the compute dtype (`dtypes`), input checks (`checks`), what a backend is not written
for (`sequences`: packed sequences, empty ones, calls without tokens), working chunk by chunk
(`chunks`: chunk-major layouts, packed sequences on a grid of chunks, per-chunk pieces), the
families with one (K, V) state matrix per head (`matrix_state`), and building the compiled CPU
kernels (`native_build`, with `native_common.h`, the header their C++ shares).

Each family's dispatch runs these around its backends, so a backend only ever sees validated
inputs with at least one token.
"""
