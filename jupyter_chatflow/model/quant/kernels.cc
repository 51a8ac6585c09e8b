// Matrix-vector products on a GGUF file's own blocks, for a decode step on CPU (`kernels.py` builds and registers
// this file; `matrix.QuantizedPart.project` calls it for a few rows).
//
// y[r, n] = sum_k x[r, k] * W[n, k], W in Q4_0, Q4_1 or Q8_0 blocks of 32 (the file's bytes, unpacked into fields by
// `formats.unpack`), x float32 [rows, k] with at most MAX_ROWS rows. The products are float32, of the values the
// dequantized matrix holds (d * q + m), in another order: each block's d * q times x, then the block's minimum
// (Q4_1's m, Q4_0's -8 d) times the block's sum of x. Each block's 32 codes are widened to float in registers (16
// lanes with AVX-512, else 8 with AVX2), so the weights are read once, packed. Output rows are split across XLA's
// intra-op thread pool.

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t MAX_ROWS = 8;
constexpr int64_t BLOCK = 32;
constexpr int64_t PREFETCH_ROWS = 8;  // how far ahead a row's codes are fetched into the cache

#if defined(__AVX512F__)
using Vec = __m512;
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec _add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline float total(Vec v) { return _mm512_reduce_add_ps(v); }
// acc + d * (32 codes, in element order, widened to float) * x[0:32]
template <bool is_signed>
inline Vec block(Vec acc, __m256i codes, const float* x, float d) {
  const __m128i lo = _mm256_castsi256_si128(codes), hi = _mm256_extracti128_si256(codes, 1);
  const __m512i w0 = is_signed ? _mm512_cvtepi8_epi32(lo) : _mm512_cvtepu8_epi32(lo);
  const __m512i w1 = is_signed ? _mm512_cvtepi8_epi32(hi) : _mm512_cvtepu8_epi32(hi);
  const Vec dv = _mm512_set1_ps(d);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_cvtepi32_ps(w0)), _mm512_loadu_ps(x), acc);
  return _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_cvtepi32_ps(w1)), _mm512_loadu_ps(x + 16), acc);
}
#else
using Vec = __m256;
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec _add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline float total(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
template <bool is_signed>
inline Vec block(Vec acc, __m256i codes, const float* x, float d) {
  const Vec dv = _mm256_set1_ps(d);
  const __m128i halves[2] = {_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1)};
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 2; ++e) {
      const __m128i eight = e ? _mm_srli_si128(halves[h], 8) : halves[h];
      const __m256i w = is_signed ? _mm256_cvtepi8_epi32(eight) : _mm256_cvtepu8_epi32(eight);
      acc = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_cvtepi32_ps(w)), _mm256_loadu_ps(x + 16 * h + 8 * e), acc);
    }
  }
  return acc;
}
#endif

// Q4_1's 16 bytes as its 32 codes in element order: value j in the low nibble of byte j, value j + 16 in its high one
inline __m256i q4_1_codes(const uint8_t* bytes16) {
  const __m128i low = _mm_set1_epi8(0x0F), bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), _mm_and_si128(bytes, low));
}

// A block's 32 codes in element order: Q8_0's 32 int8, or Q4_0's and Q4_1's 16 bytes of nibbles
template <bool Q8>
inline __m256i codes_at(const uint8_t* block) {
  return Q8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)) : q4_1_codes(block);
}

// For each of ROWS rows of x, the sum over one output row's blocks (`codes`, their float16 `scales`) of d * (q . x):
// `out`. (ROWS is a template argument so that the accumulators stay in registers; blocks go in pairs, two chains,
// so that a block's sum need not wait for the one before; the codes PREFETCH_ROWS rows on are fetched meanwhile.)
template <int ROWS, bool Q8>
void scaled_dots(const float* x, int64_t k, const uint8_t* codes, const uint16_t* scales, float (&out)[ROWS]) {
  constexpr int64_t bytes = Q8 ? BLOCK : BLOCK / 2;  // per block
  const int64_t nb = k / BLOCK;
  const uint8_t* ahead = codes + PREFETCH_ROWS * nb * bytes;
  Vec even[ROWS], odd[ROWS];
  for (int r = 0; r < ROWS; ++r) even[r] = odd[r] = zero();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + b * bytes), _MM_HINT_T0);
    if (Q8) _mm_prefetch(reinterpret_cast<const char*>(ahead + b * bytes + 32), _MM_HINT_T0);
    const __m256i c0 = codes_at<Q8>(codes + b * bytes), c1 = codes_at<Q8>(codes + (b + 1) * bytes);
    const float d0 = _cvtsh_ss(scales[b]), d1 = _cvtsh_ss(scales[b + 1]);
    for (int r = 0; r < ROWS; ++r) {
      even[r] = block<Q8>(even[r], c0, x + r * k + b * BLOCK, d0);
      odd[r] = block<Q8>(odd[r], c1, x + r * k + (b + 1) * BLOCK, d1);
    }
  }
  if (b < nb) {
    const __m256i c0 = codes_at<Q8>(codes + b * bytes);
    for (int r = 0; r < ROWS; ++r) even[r] = block<Q8>(even[r], c0, x + r * k + b * BLOCK, _cvtsh_ss(scales[b]));
  }
  for (int r = 0; r < ROWS; ++r) out[r] = total(_add(even[r], odd[r]));
}

// Q4_1 rows [n0, n1) against ROWS rows of x: per block a float16 scale d and minimum m, 16 bytes of codes;
// w = d * q + m. Q4_0's too, with m null: its minimum is -8 d (w = d * (q - 8)).
template <int ROWS>
void q4_1_rows(const float* x, const float* sums, int64_t k, const uint16_t* d, const uint16_t* m, const uint8_t* qs,
               float* y, int64_t n_all, int64_t n0, int64_t n1) {
  const int64_t nb = k / BLOCK;
  for (int64_t n = n0; n < n1; ++n) {
    float dots[ROWS];
    scaled_dots<ROWS, false>(x, k, qs + n * nb * 16, d + n * nb, dots);
    for (int r = 0; r < ROWS; ++r) {
      float minimum = 0.f;
      for (int64_t j = 0; j < nb; ++j) {
        const float low = m ? _cvtsh_ss(m[n * nb + j]) : -8.f * _cvtsh_ss(d[n * nb + j]);
        minimum += low * sums[r * nb + j];
      }
      y[r * n_all + n] = dots[r] + minimum;
    }
  }
}

// Q8_0 rows [n0, n1) against ROWS rows of x: per block a float16 scale d and 32 int8 codes; w = d * q
template <int ROWS>
void q8_0_rows(const float* x, int64_t k, const uint16_t* d, const int8_t* qs, float* y, int64_t n_all, int64_t n0,
               int64_t n1) {
  const int64_t nb = k / BLOCK;
  for (int64_t n = n0; n < n1; ++n) {
    float dots[ROWS];
    scaled_dots<ROWS, true>(x, k, reinterpret_cast<const uint8_t*>(qs) + n * k, d + n * nb, dots);
    for (int r = 0; r < ROWS; ++r) y[r * n_all + n] = dots[r];
  }
}

// f(std::integral_constant<int, rows>{}), rows 1 to MAX_ROWS: a template instance per row count
template <typename F>
void with_rows(int64_t rows, F&& f) {
  switch (rows) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// rows(a, b) over output rows [0, n) in chunks, taken by the caller and by helpers on XLA's intra-op pool as each
// comes free. A helper that wakes late finds fewer chunks left (or none), so the caller never waits on a sleeping
// thread for more than one chunk; the count of chunks handed out lives on the heap, shared with the helpers, so a
// helper that starts after the caller returned touches nothing else.
template <typename Rows>
void split(ffi::ThreadPool& pool, int64_t n, Rows&& rows) {
  constexpr int64_t CHUNK = 32;
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto shared = std::make_shared<Shared>();
  const std::function<void(int64_t, int64_t)> run = rows;
  auto work = [shared, n, &run] {
    for (int64_t a; (a = shared->next.fetch_add(CHUNK, std::memory_order_relaxed)) < n;) {
      const int64_t b = std::min(n, a + CHUNK);
      run(a, b);
      shared->done.fetch_add(b - a, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(pool.num_threads() - 1, n / CHUNK - 1);
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([work] { work(); });
  work();
  while (shared->done.load(std::memory_order_acquire) < n) _mm_pause();
}

ffi::Error check(int64_t rows, int64_t k, int64_t n, int64_t blocks) {
  if (rows < 1 || rows > MAX_ROWS) return ffi::Error::InvalidArgument("x has 1 to 8 rows");
  if (k % BLOCK || blocks != n * (k / BLOCK)) return ffi::Error::InvalidArgument("x's columns are not the blocks'");
  return ffi::Error::Success();
}

// Q4_1 (m given) or Q4_0 (m null)
ffi::Error four_bit(ffi::ThreadPool& pool, ffi::Buffer<ffi::F32>& x, ffi::Buffer<ffi::F16>& d, const uint16_t* m,
                    ffi::Buffer<ffi::U8>& qs, ffi::ResultBuffer<ffi::F32>& y) {
  const int64_t k = x.dimensions().back(), rows = x.element_count() / k, n = d.dimensions()[0], nb = k / BLOCK;
  if (ffi::Error error = check(rows, k, n, d.element_count()); error.failure()) return error;
  const float* xp = x.typed_data();
  std::vector<float> sums(rows * nb);  // each block's sum of x, for the minimum
  for (int64_t i = 0; i < rows * nb; ++i) sums[i] = std::accumulate(xp + i * BLOCK, xp + (i + 1) * BLOCK, 0.f);
  const auto* dp = reinterpret_cast<const uint16_t*>(d.typed_data());
  float* out = y->typed_data();
  with_rows(rows, [&](auto r) {
    split(pool, n, [&](int64_t a, int64_t b) {
      q4_1_rows<r>(xp, sums.data(), k, dp, m, qs.typed_data(), out, n, a, b);
    });
  });
  return ffi::Error::Success();
}

ffi::Error Q4_1(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F16> d, ffi::Buffer<ffi::F16> m,
                ffi::Buffer<ffi::U8> qs, ffi::ResultBuffer<ffi::F32> y) {
  return four_bit(pool, x, d, reinterpret_cast<const uint16_t*>(m.typed_data()), qs, y);
}

ffi::Error Q4_0(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F16> d, ffi::Buffer<ffi::U8> qs,
                ffi::ResultBuffer<ffi::F32> y) {
  return four_bit(pool, x, d, nullptr, qs, y);
}

ffi::Error Q8_0(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F16> d, ffi::Buffer<ffi::S8> qs,
                ffi::ResultBuffer<ffi::F32> y) {
  const int64_t k = x.dimensions().back(), rows = x.element_count() / k, n = d.dimensions()[0];
  if (ffi::Error error = check(rows, k, n, d.element_count()); error.failure()) return error;
  const auto* dp = reinterpret_cast<const uint16_t*>(d.typed_data());
  float* out = y->typed_data();
  with_rows(rows, [&](auto r) {
    split(pool, n, [&](int64_t a, int64_t b) { q8_0_rows<r>(x.typed_data(), k, dp, qs.typed_data(), out, n, a, b); });
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ChatflowQ4_1, Q4_1,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(ChatflowQ8_0, Q8_0,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(ChatflowQ4_0, Q4_0,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
