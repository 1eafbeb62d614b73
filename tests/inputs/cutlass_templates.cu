// Kernels whose symbols hold "cutlass" the way libraries' kernels do, without CUTLASS's headers: a type of a
// namespace cutlass in template arguments (nested and plain mangled names), two instantiations of one template,
// an anonymous-namespace kernel, a static kernel (nvcc's _INTERNAL_ prefix) and a kernel named cutlass_* itself.
// The FFMA tile loop is the shape whose code ptxas 13.0 changes under the trigger on sm_90a.
namespace cutlass {
struct half_t {
  unsigned short storage;
};
}  // namespace cutlass

namespace tile {
template <typename Element>
struct Params {
  const float* a;
  const float* b;
  float* c;
  int k;
};

// experiments/user/sgemm.cu's FFMA tile loop (C = A * B, 128x128 tiles, 256 threads, 8x8 per thread) as a
// template: a nested name with cutlass in its template arguments
template <typename Element, int kTile>
__global__ void __launch_bounds__(256) ffma_tile(Params<Element> p, int M, int N) {
  __shared__ float a_tile[8][kTile];
  __shared__ float b_tile[8][kTile];
  const int tid = threadIdx.x, K = p.k;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  const int ty = tid / (kTile / 8), tx = tid % (kTile / 8);
  const int a_row = tid / 2, a_col = (tid % 2) * 4;
  const int b_row = tid / 32, b_col = (tid % 32) * 4;
  float acc[8][8] = {};
  float a_frag[8], b_frag[8];
  for (int k0 = 0; k0 < K; k0 += 8) {
    const float4 a4 = *reinterpret_cast<const float4*>(&p.a[static_cast<long>(row0 + a_row) * K + k0 + a_col]);
    a_tile[a_col + 0][a_row] = a4.x;
    a_tile[a_col + 1][a_row] = a4.y;
    a_tile[a_col + 2][a_row] = a4.z;
    a_tile[a_col + 3][a_row] = a4.w;
    *reinterpret_cast<float4*>(&b_tile[b_row][b_col]) =
        *reinterpret_cast<const float4*>(&p.b[static_cast<long>(k0 + b_row) * N + col0 + b_col]);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 8; ++k) {
#pragma unroll
      for (int i = 0; i < 8; ++i) a_frag[i] = a_tile[k][ty * 8 + i];
#pragma unroll
      for (int j = 0; j < 8; ++j) b_frag[j] = b_tile[k][tx * 8 + j];
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* row = &p.c[static_cast<long>(row0 + ty * 8 + i) * N + col0 + tx * 8];
#pragma unroll
    for (int j = 0; j < 8; j += 4)
      *reinterpret_cast<float4*>(&row[j]) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
  }
}

template __global__ void ffma_tile<cutlass::half_t, 128>(Params<cutlass::half_t>, int, int);
template __global__ void ffma_tile<float, 128>(Params<float>, int, int);
}  // namespace tile

// a plain mangled function template with cutlass in its arguments (xformers' sparse24 kernels' form)
template <typename Kernel>
__global__ void mask_kernel(Kernel k, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = k.storage ? out[i] * 2.0f : 0.0f;
}
template __global__ void mask_kernel<cutlass::half_t>(cutlass::half_t, float*, int);

// two instantiations of one template: two kernels, each with its own baseline
template <typename T, int kUnroll>
__global__ void saxpy_t(T* y, const T* x, T a, int n) {
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * kUnroll;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (i + u < n) y[i + u] = a * x[i + u] + y[i + u];
}
template __global__ void saxpy_t<float, 4>(float*, const float*, float, int);
template __global__ void saxpy_t<double, 2>(double*, const double*, double, int);

namespace {
__global__ void scale_anonymous(float* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= a;
}
}  // namespace
static __global__ void scale_static(float* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a;
}
void launch_locals(float* y, int n) {  // keeps the anonymous and static kernels alive
  scale_anonymous<<<1, 1>>>(y, 2.0f, n);
  scale_static<<<1, 1>>>(y, 2.0f, n);
}
