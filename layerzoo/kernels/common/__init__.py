"""What every kernel family shares, one idea a module: choosing a backend (`backends`), the compute
dtype (`dtypes`), input checks (`checks`), calls without tokens (`empty`), packed sequences through
backends that do not take them (`sequences`), the families with one (K, V) state matrix per head
(`matrix_state`), chunk layouts and per-chunk pieces (`chunk_grid`, `chunk_layout`, `chunk_parts`),
compiled CPU kernels (`native_build`, `native_forward`, `native_common.h`) and when Triton may run
(`triton_support`).

Each family's public function (its folder's __init__.py) runs these around its backends, so a
backend only ever sees validated inputs with at least one token.
"""
