// Design probe (not part of pt2): a bf16 LayerNorm over rows of an odd width (4096 x 16411), whose
// rows start at a column offset each row decides (row * 16411 mod 8), timed beside a device copy.
// Every variant copies its row into shared memory by cp.async (16-byte chunks of the buffer), takes
// the mean and the variance there, then writes (x - mean) * rstd * w + b.  They differ in how the
// last loop meets the weight and bias, which are aligned to column 0 while the row's chunks are not:
//
//   cur    pt2 today: the last loop walks the row's chunks; the weight's and bias's 8 columns of a
//          chunk are funnelled from the two aligned 16-byte chunks that hold them (4 global loads)
//   wal    the last loop walks the weight's chunks: 2 global loads; the row's 8 columns funnelled
//          from two shared-memory chunks; y written back over x in shared memory, element by element
//          (a thread writes only the columns it read), then copied out chunk by chunk
//   two    cur, two rows a block that share their offset (rows r and r + 8): each funnelled weight
//          and bias serves both rows
//   walp   wal with the weight's and bias's loads issued a group ahead
//
// nvcc -O3 -arch=sm_90 -o odd_layer_norm odd_layer_norm.cu && ./odd_layer_norm [rows cols]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                 \
    do {                                                                                         \
        cudaError_t err_ = (x);                                                                  \
        if (err_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

constexpr int T = 256;   // threads a block
constexpr float EPS = 1e-5f;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// every thread gets the block's total (nrows sums at once)
template <int N>
__device__ void block_sum(float (&v)[N], float *scratch) {
    for (int k = 0; k < N; ++k) v[k] = warp_sum(v[k]);
    if (threadIdx.x % 32 == 0)
        for (int k = 0; k < N; ++k) scratch[k * 8 + threadIdx.x / 32] = v[k];
    __syncthreads();
    for (int k = 0; k < N; ++k) {
        float t = 0;
        for (int i = 0; i < T / 32; ++i) t += scratch[k * 8 + i];
        v[k] = t;
    }
    __syncthreads();
}

struct Vec8 {
    uint4 u;
};

__device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ void unpack(uint4 u, float *f) {
    uint32_t w[4] = {u.x, u.y, u.z, u.w};
    for (int i = 0; i < 4; ++i) f[2 * i] = lo(w[i]), f[2 * i + 1] = hi(w[i]);
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}

// the 8 elements starting s elements into the 32 bytes a:b (0 <= s < 8)
__device__ __forceinline__ uint4 funnel(uint4 a, uint4 b, int s) {
    uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t r[4];
    int q = s >> 1;
    uint32_t sh = (s & 1) * 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint32_t x0 = 0, x1 = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (q == k) x0 = w[i + k], x1 = w[i + k + 1];
        }
        r[i] = __funnelshift_r(x0, x1, sh);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
}

// copy rows into shared memory (their aligned chunks), then mean and rstd of each
template <int NR>
__device__ void stage_and_stats(const __nv_bfloat16 *x, const int64_t *row, int cols, uint4 *sm, int nvec,
                                int64_t (&a0)[NR], int (&s)[NR], float (&mean)[NR], float (&rstd)[NR],
                                float *scratch) {
    for (int k = 0; k < NR; ++k) {
        int64_t start = row[k] * cols;
        a0[k] = start & ~int64_t(7);
        s[k] = int(start - a0[k]);
        const uint4 *g = reinterpret_cast<const uint4 *>(x + a0[k]);
        int n = int((start + cols + 7 - a0[k]) / 8);
        for (int i = threadIdx.x; i < n; i += T) cp_async16(&sm[k * nvec + i], &g[i]);
    }
    cp_async_wait_all();
    __syncthreads();
    float sum[NR];
    for (int k = 0; k < NR; ++k) {
        sum[k] = 0;
        int n = (s[k] + cols + 7) / 8;
        for (int i = threadIdx.x; i < n; i += T) {
            float f[8];
            unpack(sm[k * nvec + i], f);
            for (int j = 0; j < 8; ++j) {
                int c = 8 * i + j - s[k];
                if (c >= 0 && c < cols) sum[k] += f[j];
            }
        }
    }
    block_sum(sum, scratch);
    for (int k = 0; k < NR; ++k) mean[k] = sum[k] / cols;
    for (int k = 0; k < NR; ++k) {
        sum[k] = 0;
        int n = (s[k] + cols + 7) / 8;
        for (int i = threadIdx.x; i < n; i += T) {
            float f[8];
            unpack(sm[k * nvec + i], f);
            for (int j = 0; j < 8; ++j) {
                int c = 8 * i + j - s[k];
                float d = f[j] - mean[k];
                if (c >= 0 && c < cols) sum[k] += d * d;
            }
        }
    }
    block_sum(sum, scratch);
    for (int k = 0; k < NR; ++k) rstd[k] = rsqrtf(sum[k] / cols + EPS);
}

// ---- cur / two: walk the row's chunks, funnel the weight and bias -------------------------------
template <int NR>
__global__ void __launch_bounds__(T, 6 / NR) ln_cur(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                                    const __nv_bfloat16 *b, __nv_bfloat16 *y, int rows,
                                                    int cols, int nvec) {
    extern __shared__ uint4 sm[];
    __shared__ float scratch[8 * NR];
    int64_t row[NR];
    if (NR == 1) {
        row[0] = blockIdx.x;
    } else {  // rows r and r + 8 share their offset when cols * 8 = 0 mod 8
        int64_t base = (blockIdx.x / 8) * 16 + blockIdx.x % 8;
        row[0] = base, row[1] = base + 8;
    }
    int64_t a0[NR];
    int s[NR];
    float mean[NR], rstd[NR];
    stage_and_stats<NR>(x, row, cols, sm, nvec, a0, s, mean, rstd, scratch);
    const uint4 *wv = reinterpret_cast<const uint4 *>(w), *bv = reinterpret_cast<const uint4 *>(b);
    int nw = (cols + 7) / 8;
    int n = (s[0] + cols + 7) / 8;
    for (int i = threadIdx.x; i < n; i += T) {
        // columns 8i - s .. 8i - s + 7: weight chunks i - 1 and i, funnelled at 8 - s
        int sk = s[0];
        uint4 wlo = i > 0 ? wv[i - 1] : make_uint4(0, 0, 0, 0), whi = i < nw ? wv[i] : make_uint4(0, 0, 0, 0);
        uint4 blo = i > 0 ? bv[i - 1] : make_uint4(0, 0, 0, 0), bhi = i < nw ? bv[i] : make_uint4(0, 0, 0, 0);
        uint4 wu = sk ? funnel(wlo, whi, 8 - sk) : whi, bu = sk ? funnel(blo, bhi, 8 - sk) : bhi;
        float wf[8], bf[8];
        unpack(wu, wf), unpack(bu, bf);
        for (int k = 0; k < NR; ++k) {
            float f[8];
            unpack(sm[k * nvec + i], f);
            uint32_t o[4];
            for (int j = 0; j < 4; ++j)
                o[j] = pack2((f[2 * j] - mean[k]) * rstd[k] * wf[2 * j] + bf[2 * j],
                             (f[2 * j + 1] - mean[k]) * rstd[k] * wf[2 * j + 1] + bf[2 * j + 1]);
            __nv_bfloat16 *yr = y + a0[k];
            bool whole = 8 * i - s[k] >= 0 && 8 * i - s[k] + 8 <= cols;
            if (whole) {
                reinterpret_cast<uint4 *>(yr)[i] = make_uint4(o[0], o[1], o[2], o[3]);
            } else {
                uint16_t *yh = reinterpret_cast<uint16_t *>(yr);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    int c = 8 * i + j - s[k];
                    if (c >= 0 && c < cols) yh[8 * i + j] = uint16_t(o[j / 2] >> (16 * (j % 2)));
                }
            }
        }
    }
}

// ---- wal / walp: walk the weight's chunks, funnel the row from shared memory -------------------
template <bool Prefetch>
__global__ void __launch_bounds__(T, 6) ln_wal(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                               const __nv_bfloat16 *b, __nv_bfloat16 *y, int rows, int cols,
                                               int nvec) {
    extern __shared__ uint4 sm[];
    __shared__ float scratch[8];
    int64_t row[1] = {blockIdx.x}, a0[1];
    int s[1];
    float mean[1], rstd[1];
    stage_and_stats<1>(x, row, cols, sm, nvec, a0, s, mean, rstd, scratch);
    const uint4 *wv = reinterpret_cast<const uint4 *>(w), *bv = reinterpret_cast<const uint4 *>(b);
    int nw = (cols + 7) / 8;
    int sk = s[0];
    __nv_bfloat16 *smh = reinterpret_cast<__nv_bfloat16 *>(sm);
    uint4 wn, bn;
    if (Prefetch && threadIdx.x < nw) wn = wv[threadIdx.x], bn = bv[threadIdx.x];
    for (int g = threadIdx.x; g < nw; g += T) {
        uint4 wu, bu;
        if (Prefetch) {
            wu = wn, bu = bn;
            if (g + T < nw) wn = wv[g + T], bn = bv[g + T];
        } else {
            wu = wv[g], bu = bv[g];
        }
        // columns 8g .. 8g + 7 sit at shared elements 8g + s ..: chunks g and g + 1
        uint4 xu = sk ? funnel(sm[g], sm[g + 1], sk) : sm[g];
        float f[8], wf[8], bf[8];
        unpack(xu, f), unpack(wu, wf), unpack(bu, bf);
        uint32_t o[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            o[j] = pack2((f[2 * j] - mean[0]) * rstd[0] * wf[2 * j] + bf[2 * j],
                         (f[2 * j + 1] - mean[0]) * rstd[0] * wf[2 * j + 1] + bf[2 * j + 1]);
        // back over the columns this thread read (and no other's)
        uint16_t *dst = reinterpret_cast<uint16_t *>(smh + 8 * g + sk);
        int m = min(8, cols - 8 * g);
        if (m == 8 && (sk & 1) == 0) {
            uint32_t *d32 = reinterpret_cast<uint32_t *>(dst);
            for (int j = 0; j < 4; ++j) d32[j] = o[j];
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (j < m) dst[j] = uint16_t(o[j / 2] >> (16 * (j % 2)));
        }
    }
    __syncthreads();
    int n = (sk + cols + 7) / 8;
    __nv_bfloat16 *yr = y + a0[0];
    for (int i = threadIdx.x; i < n; i += T) {
        bool whole = 8 * i - sk >= 0 && 8 * i - sk + 8 <= cols;
        if (whole) {
            reinterpret_cast<uint4 *>(yr)[i] = sm[i];
        } else {
            for (int j = 0; j < 8; ++j) {
                int c = 8 * i + j - sk;
                if (c >= 0 && c < cols) yr[8 * i + j] = smh[8 * i + j];
            }
        }
    }
}

static float bf2f(__nv_bfloat16 h) {
    uint16_t u;
    memcpy(&u, &h, 2);
    uint32_t v = uint32_t(u) << 16;
    float f;
    memcpy(&f, &v, 4);
    return f;
}

int main(int argc, char **argv) {
    int rows = argc > 1 ? atoi(argv[1]) : 4096, cols = argc > 2 ? atoi(argv[2]) : 16411;
    size_t n = size_t(rows) * cols;
    std::vector<__nv_bfloat16> hx(n), hw(cols), hb(cols);
    srand(1);
    for (size_t i = 0; i < n; ++i) hx[i] = __float2bfloat16(float(rand()) / RAND_MAX * 4 - 2 + (i / cols) % 3);
    for (int i = 0; i < cols; ++i) hw[i] = __float2bfloat16(float(rand()) / RAND_MAX + 0.5f);
    for (int i = 0; i < cols; ++i) hb[i] = __float2bfloat16(float(rand()) / RAND_MAX - 0.5f);
    __nv_bfloat16 *x, *w, *b, *y, *c;
    CHECK(cudaMalloc(&x, n * 2));
    CHECK(cudaMalloc(&y, n * 2));
    CHECK(cudaMalloc(&c, n * 2));
    CHECK(cudaMalloc(&w, cols * 2));
    CHECK(cudaMalloc(&b, cols * 2));
    CHECK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, hw.data(), cols * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb.data(), cols * 2, cudaMemcpyHostToDevice));
    int nvec = (cols + 7) / 8 + 1;  // a row's chunks, at most
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const int iters = 50;
    auto timeit = [&](auto launch) {
        for (int i = 0; i < 5; ++i) launch();
        CHECK(cudaEventRecord(e0));
        for (int i = 0; i < iters; ++i) launch();
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return ms * 1000 / iters;
    };
    float copy_us = timeit([&] { CHECK(cudaMemcpyAsync(c, x, n * 2, cudaMemcpyDeviceToDevice)); });
    printf("rows %d cols %d bf16: memcpy %.1f us (%.0f GB/s)\n", rows, cols, copy_us, 2.0 * n * 2 / copy_us / 1e3);
    // reference rows
    std::vector<int> check = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, rows - 1};
    auto verify = [&](const char *name) {
        std::vector<__nv_bfloat16> hy(n);
        CHECK(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r : check) {
            double s = 0, q = 0;
            for (int j = 0; j < cols; ++j) s += bf2f(hx[size_t(r) * cols + j]);
            double m = s / cols;
            for (int j = 0; j < cols; ++j) {
                double d = bf2f(hx[size_t(r) * cols + j]) - m;
                q += d * d;
            }
            double rs = 1 / sqrt(q / cols + EPS);
            for (int j = 0; j < cols; ++j) {
                double ref = (bf2f(hx[size_t(r) * cols + j]) - m) * rs * bf2f(hw[j]) + bf2f(hb[j]);
                double got = bf2f(hy[size_t(r) * cols + j]);
                worst = fmax(worst, fabs(got - ref) / (1 + fabs(ref)));
            }
        }
        return worst;
    };
    size_t smem1 = size_t(nvec) * 16;
    auto report = [&](const char *name, float us) {
        double err = verify(name);
        printf("%-5s %7.1f us  %5.1f %% of memcpy  max rel err %.2e%s\n", name, us, 100 * copy_us / us, err,
               err > 2e-2 ? "  WRONG" : "");
        CHECK(cudaMemset(y, 0, n * 2));
    };
    CHECK(cudaFuncSetAttribute(ln_cur<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem1)));
    CHECK(cudaFuncSetAttribute(ln_cur<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(2 * smem1)));
    CHECK(cudaFuncSetAttribute(ln_wal<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem1)));
    CHECK(cudaFuncSetAttribute(ln_wal<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem1)));
    for (int round = 0; round < 2; ++round) {
        report("cur", timeit([&] { ln_cur<1><<<rows, T, smem1>>>(x, w, b, y, rows, cols, nvec); }));
        if (rows % 16 == 0)
            report("two", timeit([&] { ln_cur<2><<<rows / 2, T, 2 * smem1>>>(x, w, b, y, rows, cols, nvec); }));
        report("wal", timeit([&] { ln_wal<false><<<rows, T, smem1>>>(x, w, b, y, rows, cols, nvec); }));
        report("walp", timeit([&] { ln_wal<true><<<rows, T, smem1>>>(x, w, b, y, rows, cols, nvec); }));
    }
    CHECK(cudaGetLastError());
    return 0;
}
