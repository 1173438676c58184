"""Facts about PSK-Kernel loops, computed in one place.

The translator, `psk-split`, the JIT's runner, the kernel interpreter and the
cost model all ask the same questions of a kernel (which loop a call
divides, how many iterations it has, which buffers it writes, which loop
is a register tile's); each answer
is defined once here, on the PSK-Kernel ops, without building any IR.
"""

from presk.analysis.kernel_loops import (
    STORE_OPS,
    affine_index,
    attr,
    block_trip_count,
    constant_int,
    index_range,
    is_register_tile_loop,
    launch_iterations,
    loop_trips,
    sets_inner_bounds,
    split_loop,
    trip_count,
    written_buffers,
)

__all__ = [
    "STORE_OPS", "affine_index", "attr", "block_trip_count", "constant_int", "index_range", "is_register_tile_loop",
    "launch_iterations", "loop_trips", "sets_inner_bounds", "split_loop", "trip_count", "written_buffers",
]  # fmt: skip
