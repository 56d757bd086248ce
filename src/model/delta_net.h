// The Gated DeltaNet recurrence of qwen35's linear-attention layers
// (model/forward_recurrent.cc), as ggml's gated_delta_net op computes it on
// the CPU: one token at a time, for prefill chunks and decode alike.
//
// A head's state is an S x S matrix M with row j holding, over the key dims
// i, the value dim j's weights (ggml's transposed layout: a row is
// contiguous, so each row's work stays in L1). For a token with query q,
// key k (both L2-normalized), value v, decay g = exp(gate) and beta:
//   M <- g M;  d_j = (v_j - M_j . k) beta;  M_j <- M_j + d_j k;  o_j = (M_j . q) scale
// The chunked (parallel) form of the same recurrence trades this for
// matrix products, which pays on GPUs; on CPUs the token loop touches each
// state row once per token, costs ~4 S^2 multiply-adds per head (a few
// percent of a layer's weight products), and gives the same bits however
// a prompt is split into chunks, which keeps a reused prefix identical to a
// cold prefill.
#pragma once

namespace tkv::model::ops {

// One token's update of one head's state (S x S floats) and its output
// o[0, S). q, k, v: S floats each.
void delta_rule_token(float* state, const float* q, const float* k, const float* v, float decay,
                      float beta, float scale, float* o, int S);

}  // namespace tkv::model::ops
