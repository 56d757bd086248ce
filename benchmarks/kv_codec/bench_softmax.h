// Online-softmax step of the decode-attention benchmark (the same work the
// attention driver does between score() and accumulate()).
#pragma once

namespace tkv::bench {

// s[0..n) -> exp(s - m_new) in place, where m_new = max(m, max(s)); updates
// m and l (l = l * exp(m - m_new) + sum) and returns exp(m - m_new), the
// factor the value accumulator must be scaled by.
float online_softmax_step(float* s, int n, float& m, float& l);

}  // namespace tkv::bench
