// Flash-attention forward (FA2 schedule) in CUDA C++ for ptxprobe.
//
// One CTA = 4 warps = 64 query rows; each warp owns 16 rows and keeps its O accumulator,
// row max and row sum in registers. Key/value tiles of 64 rows stream through shared memory
// with cp.async in a 2-stage pipeline. Shared-memory rows are XOR-swizzled in 16-byte chunks
// so ldmatrix reads are bank-conflict free. S = Q K^T and O += P V use mma.sync m16n8k16
// (fp16 or bf16 in, fp32 accumulate); P goes from the S accumulators straight into A
// fragments without touching shared memory.
//
// Compile-time choices (one kernel per PTX, so renames touch one entry):
//   PTXPROBE_BF16      0 = fp16, 1 = bf16
//   PTXPROBE_HEAD_DIM  64 or 128
//   PTXPROBE_CAUSAL    0 or 1
//   PTXPROBE_ENTRY     the extern "C" entry name
// Layout: Q, K, V, O contiguous [batch*heads][seq_len][head_dim]; seq_len % 64 == 0.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#ifndef PTXPROBE_BF16
#define PTXPROBE_BF16 0
#endif
#ifndef PTXPROBE_HEAD_DIM
#define PTXPROBE_HEAD_DIM 128
#endif
#ifndef PTXPROBE_CAUSAL
#define PTXPROBE_CAUSAL 0
#endif
#ifndef PTXPROBE_ENTRY
#define PTXPROBE_ENTRY flash_attention
#endif

namespace {

constexpr int kD = PTXPROBE_HEAD_DIM;
constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kWarps = 4;
constexpr int kChunks = kD / 8;  // 16-byte chunks per row

#if PTXPROBE_BF16
typedef __nv_bfloat16 elem_t;
#else
typedef __half elem_t;
#endif

// byte offset of (row, 16-byte chunk) inside a [rows][kD] tile, chunks XOR-swizzled by row
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return (uint32_t)(row * kD * 2 + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if PTXPROBE_BF16
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if PTXPROBE_BF16
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#else
  __half2 v = __floats2half2_rn(lo, hi);
#endif
  return *reinterpret_cast<uint32_t*>(&v);
}

// copy a [rows][kD] tile from global (row stride kD) into swizzled shared memory
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t smem, const elem_t* g, int tid) {
#pragma unroll
  for (int i = tid; i < ROWS * kChunks; i += kWarps * 32) {
    int row = i / kChunks, chunk = i % kChunks;
    cp_async16(smem + swz(row, chunk), g + row * kD + chunk * 8);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kWarps * 32)
PTXPROBE_ENTRY(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
               elem_t* __restrict__ O, float softmax_scale, int seq_len) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem = (uint32_t)__cvta_generic_to_shared(smem_raw);
  // [Q | K stage 0 | K stage 1 | V stage 0 | V stage 1]; a stage is selected by arithmetic,
  // not by indexing an array with a run-time value (that would put the array on the stack)
  constexpr uint32_t kTile = kBlockN * kD * 2;
  const uint32_t sQ = smem;
  const uint32_t sK0 = sQ + kBlockM * kD * 2;
  const uint32_t sV0 = sK0 + 2 * kTile;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m_block = blockIdx.x;
  const size_t head = (size_t)blockIdx.y * seq_len * kD;
  const elem_t* q = Q + head + (size_t)m_block * kBlockM * kD;
  const elem_t* k = K + head;
  const elem_t* v = V + head;

  const int n_blocks = PTXPROBE_CAUSAL ? (m_block + 1) * kBlockM / kBlockN : seq_len / kBlockN;

  load_tile<kBlockM>(sQ, q, tid);
  load_tile<kBlockN>(sK0, k, tid);
  load_tile<kBlockN>(sV0, v, tid);
  cp_async_commit();

  float acc_o[kD / 8][4];
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = softmax_scale * 1.4426950408889634f;
  uint32_t q_frag[kD / 16][4];

  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb & 1;
    if (nb + 1 < n_blocks) {  // prefetch the next key/value tile into the other stage
      load_tile<kBlockN>(sK0 + (stage ^ 1) * kTile, k + (size_t)(nb + 1) * kBlockN * kD, tid);
      load_tile<kBlockN>(sV0 + (stage ^ 1) * kTile, v + (size_t)(nb + 1) * kBlockN * kD, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (nb == 0) {  // this warp's 16 query rows as A fragments, once
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk)
        ldmatrix_x4(q_frag[kk], sQ + swz(warp * 16 + (lane % 16), kk * 2 + lane / 16));
    }
    // S = Q K^T for this warp's 16 rows x 64 keys: 8 n-tiles of 8 keys
    float s[kBlockN / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; j += 2) {
        uint32_t b[4];  // n-tile j (k lo, k hi), n-tile j+1 (k lo, k hi)
        const int mi = lane / 8;
        ldmatrix_x4(b, sK0 + stage * kTile + swz(j * 8 + (mi / 2) * 8 + lane % 8, kk * 2 + mi % 2));
        mma16816(s[j], q_frag[kk], b[0], b[1]);
        mma16816(s[j + 1], q_frag[kk], b[2], b[3]);
      }
    }
    // online softmax: each thread holds rows r0 = lane/4 and r0 + 8 of the warp's 16
    const int r0 = m_block * kBlockM + warp * 16 + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = s[j][2 * h + e] * scale_log2;
          if (PTXPROBE_CAUSAL) {
            const int key = nb * kBlockN + j * 8 + (lane % 4) * 2 + e;
            if (key > r0 + 8 * h) x = -INFINITY;
          }
          s[j][2 * h + e] = x;
          mx = fmaxf(mx, x);
        }
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      const float alpha = exp2f(row_max[h] - mx);
      row_max[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(s[j][2 * h + e] - mx);
          s[j][2 * h + e] = p;
          sum += p;
        }
      }
      row_sum[h] = row_sum[h] * alpha + sum;  // per-thread partial: reduced across the quad at the end
#pragma unroll
      for (int i = 0; i < kD / 8; ++i) {
        acc_o[i][2 * h] *= alpha;
        acc_o[i][2 * h + 1] *= alpha;
      }
    }
    // O += P V: P's accumulators become A fragments (two adjacent n-tiles make one k16 step)
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                       pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int d = 0; d < kD / 8; d += 2) {
        uint32_t b[4];  // V[keys][d] is row-major [k][n]: transpose while loading
        const int mi = lane / 8;
        ldmatrix_x4_trans(b, sV0 + stage * kTile + swz(kk * 16 + (mi % 2) * 8 + lane % 8, d + mi / 2));
        mma16816(acc_o[d], a, b[0], b[1]);
        mma16816(acc_o[d + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the stage just read is overwritten by the next prefetch
  }
  cp_async_wait<0>();

  // normalise and store: thread holds (row lane/4 [+8], cols d*8 + (lane%4)*2 + {0,1})
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    const float inv = 1.f / l;
    const int row = m_block * kBlockM + warp * 16 + lane / 4 + 8 * h;
    elem_t* out = O + head + (size_t)row * kD;
#pragma unroll
    for (int d = 0; d < kD / 8; ++d) {
      const uint32_t packed = pack2(acc_o[d][2 * h] * inv, acc_o[d][2 * h + 1] * inv);
      *reinterpret_cast<uint32_t*>(out + d * 8 + (lane % 4) * 2) = packed;
    }
  }
}
