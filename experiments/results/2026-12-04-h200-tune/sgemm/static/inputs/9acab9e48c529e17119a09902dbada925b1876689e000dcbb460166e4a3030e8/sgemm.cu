// FP32 GEMM, C = A * B (row-major, M and N multiples of 128, K a multiple of 8).
// A 128x128 block tile per 256 threads, each thread an 8x8 register tile: 64 FFMAs per
// k step per thread, the FFMA-heavy shape for which name effects on sm_80/sm_90 have been
// reported. The A tile is stored transposed in shared memory so both fragments are rows.
#include <cstddef>

namespace {
constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8, kThreads = 256;
}

extern "C" __global__ void __launch_bounds__(kThreads)
    sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float a_tile[kBK][kBM];  // a_tile[k][m]
  __shared__ float b_tile[kBK][kBN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int ty = tid / (kBN / kTN), tx = tid % (kBN / kTN);
  const int a_row = tid / 2, a_col = (tid % 2) * 4;     // 128 rows x 8 cols, a float4 per thread
  const int b_row = tid / 32, b_col = (tid % 32) * 4;   // 8 rows x 128 cols, a float4 per thread
  float acc[kTM][kTN] = {};
  float a_frag[kTM], b_frag[kTN];
  for (int k0 = 0; k0 < K; k0 += kBK) {
    const float4 a4 = *reinterpret_cast<const float4*>(&A[static_cast<size_t>(row0 + a_row) * K + k0 + a_col]);
    a_tile[a_col + 0][a_row] = a4.x;
    a_tile[a_col + 1][a_row] = a4.y;
    a_tile[a_col + 2][a_row] = a4.z;
    a_tile[a_col + 3][a_row] = a4.w;
    *reinterpret_cast<float4*>(&b_tile[b_row][b_col]) =
        *reinterpret_cast<const float4*>(&B[static_cast<size_t>(k0 + b_row) * N + col0 + b_col]);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
#pragma unroll
      for (int i = 0; i < kTM; ++i) a_frag[i] = a_tile[k][ty * kTM + i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b_frag[j] = b_tile[k][tx * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    float* row = &C[static_cast<size_t>(row0 + ty * kTM + i) * N + col0 + tx * kTN];
#pragma unroll
    for (int j = 0; j < kTN; j += 4)
      *reinterpret_cast<float4*>(&row[j]) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
  }
}
