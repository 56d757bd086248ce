// One mixture-of-experts FFN layer in llama.cpp's ggml, built node for node
// as llama.cpp's build_moe_ffn builds a qwen3moe layer (router product,
// softmax, top-k, normalized weights, the gate, up and down MUL_MAT_ID,
// SwiGLU, the weighted sum as a chain of adds), with the expert weights in
// llama.cpp's repacked CPU buffer where it has one for the type (as it
// loads a model), timed on the CPU backend. The layer beside which
// benchmarks/model/bench_moe times turbokv's; compiled and run against a
// llama.cpp build by scripts/moe-layer-llama.sh, never by the project's
// build (it needs llama.cpp's headers and libraries).
//
//   moe_layer_ggml SHAPE TYPE ROWS THREADS SECONDS
//   SHAPE: qwen3-30b-a3b (128 experts of 2048 x 768, top 8) or gpt-oss-20b
//   (32 of 2880 x 2880, top 4); TYPE: q4_K, q8_0, mxfp4
//
// Prints one line: shape, type, rows, threads, runs, ms per layer, buffer.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "moe_layer_ggml: %s\n", msg.c_str());
  std::exit(2);
}

struct Shape {
  int n_expert, n_used;
  int64_t n_embd, n_ff;
};

Shape shape_named(const std::string& name) {
  if (name == "qwen3-30b-a3b") return {128, 8, 2048, 768};
  if (name == "gpt-oss-20b") return {32, 4, 2880, 2880};
  die("unknown shape '" + name + "' (qwen3-30b-a3b, gpt-oss-20b)");
}

ggml_type type_named(const std::string& name) {
  if (name == "q4_K") return GGML_TYPE_Q4_K;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  if (name == "mxfp4") return GGML_TYPE_MXFP4;
  die("unknown type '" + name + "' (q4_K, q8_0, mxfp4)");
}

// llama.cpp's CPU_REPACK buffer type, where the CPU device offers it.
ggml_backend_buffer_type_t repack_buffer_type() {
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  auto get = reinterpret_cast<ggml_backend_buffer_type_t* (*)(ggml_backend_dev_t)>(
      ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
  if (!get) return nullptr;
  for (ggml_backend_buffer_type_t* b = get(dev); b && *b; ++b)
    if (std::string(ggml_backend_buft_name(*b)) == "CPU_REPACK") return *b;
  return nullptr;
}

// Uniform values of variance 1 / fan_in, quantized to t's type row by row;
// one matrix's worth, repeated over the experts of a 3-D t (the products'
// speed does not depend on the values, and quantizing every expert would
// take minutes).
void fill(ggml_tensor* t, std::mt19937& rng) {
  const int64_t cols = t->ne[0], rows = t->ne[1], mats = ggml_nrows(t) / rows;
  const float a = std::sqrt(3.0f / float(cols));
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> values(size_t(cols * rows));
  for (float& v : values) v = d(rng);
  const size_t mat_bytes = ggml_row_size(t->type, cols) * size_t(rows);
  std::vector<uint8_t> bytes(ggml_nbytes(t));
  if (t->type == GGML_TYPE_F32)
    std::memcpy(bytes.data(), values.data(), mat_bytes);
  else
    ggml_quantize_chunk(t->type, values.data(), bytes.data(), 0, rows, cols, nullptr);
  for (int64_t m = 1; m < mats; ++m)
    std::memcpy(bytes.data() + size_t(m) * mat_bytes, bytes.data(), mat_bytes);
  ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) die("usage: moe_layer_ggml SHAPE TYPE ROWS THREADS SECONDS");
  const Shape s = shape_named(argv[1]);
  const ggml_type type = type_named(argv[2]);
  const int rows = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  const double seconds = std::atof(argv[5]);
  if (rows < 1 || threads < 1 || !(seconds > 0)) die("ROWS, THREADS and SECONDS must be positive");

  ggml_backend_t cpu = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(cpu, threads);

  // The experts in the repack buffer where llama.cpp repacks the type (its
  // init gives the tensors their repacked form), else in a plain one.
  ggml_init_params wp = {16 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* wx = ggml_init(wp);
  ggml_tensor* gate = ggml_new_tensor_3d(wx, type, s.n_embd, s.n_ff, s.n_expert);
  ggml_tensor* up = ggml_new_tensor_3d(wx, type, s.n_embd, s.n_ff, s.n_expert);
  ggml_tensor* down = ggml_new_tensor_3d(wx, type, s.n_ff, s.n_embd, s.n_expert);
  std::string buffer = "CPU";
  ggml_backend_buffer_t wbuf = nullptr;
  if (ggml_backend_buffer_type_t rb = repack_buffer_type()) {
    wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wx, rb);
    if (wbuf && gate->extra && up->extra && down->extra) {
      buffer = "CPU_REPACK";
    } else if (wbuf) {
      ggml_backend_buffer_free(wbuf);
      wbuf = nullptr;
      for (ggml_tensor* t : {gate, up, down})
        t->buffer = nullptr, t->data = nullptr, t->extra = nullptr;
    }
  }
  if (!wbuf) wbuf = ggml_backend_alloc_ctx_tensors(wx, cpu);

  // The router and the rows in a buffer of their own, which the graph's
  // allocator never reuses between runs.
  ggml_init_params ip = {2 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ix = ggml_init(ip);
  ggml_tensor* router = ggml_new_tensor_2d(ix, GGML_TYPE_F32, s.n_embd, s.n_expert);
  ggml_tensor* x = ggml_new_tensor_2d(ix, GGML_TYPE_F32, s.n_embd, rows);
  ggml_backend_buffer_t ibuf = ggml_backend_alloc_ctx_tensors(ix, cpu);

  ggml_init_params gp = {64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* gx = ggml_init(gp);

  // build_moe_ffn for qwen3moe: softmax gating, normalized top-k weights.
  ggml_tensor* probs = ggml_soft_max(gx, ggml_mul_mat(gx, router, x));
  ggml_tensor* selected = ggml_argsort_top_k(gx, probs, s.n_used);
  ggml_tensor* weights =
      ggml_get_rows(gx, ggml_reshape_3d(gx, probs, 1, s.n_expert, rows), selected);
  weights = ggml_reshape_2d(gx, weights, s.n_used, rows);
  ggml_tensor* weights_sum = ggml_clamp(gx, ggml_sum_rows(gx, weights), 6.103515625e-5f, INFINITY);
  weights = ggml_reshape_3d(gx, ggml_div(gx, weights, weights_sum), 1, s.n_used, rows);
  ggml_tensor* cur = ggml_reshape_3d(gx, x, s.n_embd, 1, rows);
  ggml_tensor* u = ggml_mul_mat_id(gx, up, cur, selected);
  ggml_tensor* g = ggml_mul_mat_id(gx, gate, cur, selected);
  ggml_tensor* experts = ggml_mul_mat_id(gx, down, ggml_swiglu_split(gx, g, u), selected);
  experts = ggml_mul(gx, experts, weights);
  ggml_tensor* out = nullptr;
  for (int i = 0; i < s.n_used; ++i) {
    ggml_tensor* v =
        ggml_view_2d(gx, experts, s.n_embd, rows, experts->nb[2], size_t(i) * experts->nb[1]);
    out = out ? ggml_add(gx, out, v) : v;
  }
  ggml_cgraph* graph = ggml_new_graph(gx);
  ggml_build_forward_expand(graph, out);
  ggml_gallocr_t alloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu));
  if (!ggml_gallocr_alloc_graph(alloc, graph)) die("cannot allocate the graph");

  std::mt19937 rng(7);
  fill(router, rng);
  for (ggml_tensor* t : {gate, up, down}) fill(t, rng);
  std::vector<float> xv(size_t(s.n_embd) * size_t(rows));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : xv) v = nd(rng);
  ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

  if (ggml_backend_graph_compute(cpu, graph) != GGML_STATUS_SUCCESS) die("graph compute failed");
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  int runs = 0;
  double elapsed = 0;
  do {
    ggml_backend_graph_compute(cpu, graph);
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  } while (elapsed < seconds);
  std::printf("%s %s rows=%d threads=%d runs=%d ms=%.4f buffer=%s\n", argv[1], argv[2], rows,
              threads, runs, 1e3 * elapsed / runs, buffer.c_str());
  ggml_gallocr_free(alloc);
  ggml_free(gx);
  ggml_backend_buffer_free(ibuf);
  ggml_free(ix);
  ggml_backend_buffer_free(wbuf);
  ggml_free(wx);
  ggml_backend_free(cpu);
  return 0;
}
