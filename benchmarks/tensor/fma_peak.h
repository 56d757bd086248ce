// Measured f32 FMA throughput of one core with the best SIMD target: the
// ceiling the matmul benchmark's GFLOP/s are compared to.
#pragma once

namespace tkv::bench {

// Runs `iterations` rounds of independent FMA chains (enough to hide the
// latency) and returns the number of flops performed (2 per lane per FMA).
double run_fma_chains(long iterations);

}  // namespace tkv::bench
