// Machine probes for bench_matmul, with the best SIMD target: f32 FMA
// throughput (the ceiling for matmul GFLOP/s) and a STREAM-like read (the
// ceiling for matvec GB/s).
#pragma once

#include <cstddef>

namespace tkv::bench {

// Sums n floats from p with 8 vector accumulators (a pure streaming read;
// n must be a multiple of 128). Returns the sum so the loads stay.
float read_sum(const float* p, size_t n);

// Runs `iterations` rounds of independent FMA chains (enough to hide the
// latency) and returns the number of flops performed (2 per lane per FMA).
double run_fma_chains(long iterations);

}  // namespace tkv::bench
