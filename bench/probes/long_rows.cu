// Design probe (not part of pt2): softmax over rows too long for registers (an LM head's logits,
// 2048 x 50257 f32), three ways of keeping a row in shared memory, timed beside a device copy.
//
//   one   one block of 1024 threads a row, the whole row in shared memory (pt2's row kernel today:
//         one block an SM, the phases of a row not overlapped by another row's)
//   clN   a cluster of N blocks a row (1024 / N threads each), each keeping 1/N of the row and
//         exchanging its partial max and sum through distributed shared memory (sm_90)
//   pipe  persistent blocks (one an SM): the output loop of row r loads row r + grid into the
//         shared memory it frees, so that row r's stores overlap row r+grid's loads
//   async clN with the row's part copied into shared memory by cp.async, all at once in G groups
//
// (cols a multiple of 4: 50260 stands for 50257)
// nvcc -O3 -arch=sm_90 -o long_rows long_rows.cu && ./long_rows [rows cols]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(x)                                                                            \
    do {                                                                                    \
        cudaError_t err_ = (x);                                                             \
        if (err_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)


template <bool Max>
__device__ float warp_reduce(float v) {
    for (int o = 16; o > 0; o /= 2) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = Max ? fmaxf(v, w) : v + w;
    }
    return v;
}

// every thread gets the block's total
template <bool Max>
__device__ float block_reduce(float v, float *scratch) {
    v = warp_reduce<Max>(v);
    int warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float t = scratch[0];
    for (int i = 1; i < warps; ++i) t = Max ? fmaxf(t, scratch[i]) : t + scratch[i];
    __syncthreads();
    return t;
}

// -------------------------------------------------------------------------------------------------
// one (N = 1) and clN: a row in N blocks of a cluster, 16-byte vectors, partials through distributed
// shared memory; cols a multiple of 4 (the rows' starts aligned)
// -------------------------------------------------------------------------------------------------
template <int N, bool Max>
__device__ float row_reduce(float v, float *scratch, float *xch) {
    v = block_reduce<Max>(v, scratch);
    if (N == 1) return v;
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0) *xch = v;
    cl.sync();  // barrier.cluster.arrive.release + wait.acquire
    float t = 0.f;
#pragma unroll
    for (int r = 0; r < N; ++r) {  // rank order in every block: the same total everywhere
        float p = *cl.map_shared_rank(xch, r);
        t = r == 0 ? p : Max ? fmaxf(t, p) : t + p;
    }
    return t;
}

__device__ inline float4 ninf4() { return make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY); }
__device__ inline float max4(float m, float4 v) { return fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w)); }

// the sum of exp(x - m) over this thread's vectors in shared memory: slot j holds the row's vector
// lane + j * stride (those past vecs out of the row)
__device__ float exp_sum(const float4 *s4, float m, int lane, int stride, int slots, int vecs) {
    const int T = blockDim.x, tid = threadIdx.x;
    float sum = 0.f;
    for (int j = 0; j < slots; ++j) {
        if (lane + j * stride < vecs) {
            float4 v = s4[j * T + tid];
            sum += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
        }
    }
    return sum;
}

// the row's max m (this block's part of it), the sum of exp(x - m) over shared memory, the output:
// what every clN and async variant does once its part of the row is in shared memory
template <int N>
__device__ void softmax_tail(const float4 *s4, float *scratch, float *xch, float m, int lane, int slots, int vecs, float4 *yr) {
    const int T = blockDim.x, tid = threadIdx.x, TT = T * N;
    m = row_reduce<N, true>(m, scratch, &xch[0]);
    float sum = row_reduce<N, false>(exp_sum(s4, m, lane, TT, slots, vecs), scratch, &xch[1]);
    float r = 1.f / sum;
    for (int j = 0; j < slots; ++j) {
        int c = lane + j * TT;
        if (c < vecs) {
            float4 v = s4[j * T + tid];
            yr[c] = make_float4(expf(v.x - m) * r, expf(v.y - m) * r, expf(v.z - m) * r, expf(v.w - m) * r);
        }
    }
    if (N > 1) cg::this_cluster().sync();  // no block leaves while a peer may still read its xch
}

template <int N, int UV>
__global__ void __launch_bounds__(1024 / N) softmax_rows(const float *__restrict__ x, float *__restrict__ y, int cols) {
    extern __shared__ float4 s4[];
    __shared__ float scratch[32];
    __shared__ float xch[2];  // the max's partial, the sum's (each read by the peers after one cluster barrier)
    const int T = blockDim.x, tid = threadIdx.x;
    const int rank = N == 1 ? 0 : (int)cg::this_cluster().block_rank(), TT = T * N, lane = rank * T + tid;
    const size_t row = blockIdx.x / N;
    const float4 *xr = (const float4 *)(x + row * cols);
    float4 *yr = (float4 *)(y + row * cols);
    const int vecs = cols / 4, slots = (vecs + TT - 1) / TT;
    float m = -INFINITY;
    for (int j0 = 0; j0 < slots; j0 += UV) {
        float4 v[UV];
#pragma unroll
        for (int u = 0; u < UV; ++u) {
            int c = lane + (j0 + u) * TT;
            v[u] = c < vecs ? xr[c] : ninf4();
        }
#pragma unroll
        for (int u = 0; u < UV; ++u) {
            if (j0 + u < slots) s4[(j0 + u) * T + tid] = v[u];
            m = max4(m, v[u]);
        }
    }
    softmax_tail<N>(s4, scratch, xch, m, lane, slots, vecs, yr);
}

// -------------------------------------------------------------------------------------------------
// clN async: as clN, but the row's part comes into shared memory by cp.async (16 bytes a lane a
// slot, no registers held): every slot's copy in flight at once, in G groups, the max's loop taking
// each group as soon as it has landed (cp.async.wait_group), so that no load waits on a register
// -------------------------------------------------------------------------------------------------
__device__ inline void cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int K>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(K)); }

template <int N, int G>
__global__ void __launch_bounds__(1024 / N) softmax_rows_async(const float *__restrict__ x, float *__restrict__ y, int cols) {
    extern __shared__ float4 s4[];
    __shared__ float scratch[32];
    __shared__ float xch[2];
    const int T = blockDim.x, tid = threadIdx.x;
    const int rank = N == 1 ? 0 : (int)cg::this_cluster().block_rank(), TT = T * N, lane = rank * T + tid;
    const size_t row = blockIdx.x / N;
    const float4 *xr = (const float4 *)(x + row * cols);
    float4 *yr = (float4 *)(y + row * cols);
    const int vecs = cols / 4, slots = (vecs + TT - 1) / TT, per = (slots + G - 1) / G;
#pragma unroll
    for (int g = 0; g < G; ++g) {
        for (int j = g * per; j < (g + 1) * per && j < slots; ++j) {
            int c = lane + j * TT;
            if (c < vecs) cp_async16(&s4[j * T + tid], &xr[c]);
        }
        cp_async_commit();
    }
    float m = -INFINITY;
#pragma unroll
    for (int g = 0; g < G; ++g) {
        if (g == 0) cp_async_wait<G - 1>();
        if (g == 1) cp_async_wait<(G > 1 ? G - 2 : 0)>();
        if (g == 2) cp_async_wait<(G > 2 ? G - 3 : 0)>();
        if (g == 3) cp_async_wait<(G > 3 ? G - 4 : 0)>();
        if (g == 4) cp_async_wait<(G > 4 ? G - 5 : 0)>();
        if (g == 5) cp_async_wait<(G > 5 ? G - 6 : 0)>();
        if (g == 6) cp_async_wait<(G > 6 ? G - 7 : 0)>();
        if (g == 7) cp_async_wait<(G > 7 ? G - 8 : 0)>();
        for (int j = g * per; j < (g + 1) * per && j < slots; ++j) {
            int c = lane + j * TT;
            if (c < vecs) m = max4(m, s4[j * T + tid]);
        }
    }
    softmax_tail<N>(s4, scratch, xch, m, lane, slots, vecs, yr);
}

// -------------------------------------------------------------------------------------------------
// pipe: persistent blocks (one an SM), the next row loaded by the output loop, 16-byte vectors
// -------------------------------------------------------------------------------------------------
template <int UV>
__global__ void __launch_bounds__(1024) softmax_pipe(const float *__restrict__ x, float *__restrict__ y, int rows, int cols) {
    extern __shared__ float4 s4[];
    __shared__ float scratch[32];
    const int T = blockDim.x, tid = threadIdx.x;
    const int vecs = cols / 4, slots = (vecs + T - 1) / T;
    int row = blockIdx.x;
    if (row >= rows) return;
    float m = -INFINITY;
    {
        const float4 *xr = (const float4 *)(x + (size_t)row * cols);
        for (int j0 = 0; j0 < slots; j0 += UV) {
            float4 v[UV];
#pragma unroll
            for (int u = 0; u < UV; ++u) {
                int c = tid + (j0 + u) * T;
                v[u] = c < vecs ? xr[c] : ninf4();
            }
#pragma unroll
            for (int u = 0; u < UV; ++u) {
                if (j0 + u < slots) s4[(j0 + u) * T + tid] = v[u];
                m = max4(m, v[u]);
            }
        }
    }
    for (;;) {
        m = block_reduce<true>(m, scratch);
        float sum = block_reduce<false>(exp_sum(s4, m, tid, T, slots, vecs), scratch);
        float r = 1.f / sum;
        int next = row + gridDim.x;
        float4 *yr = (float4 *)(y + (size_t)row * cols);
        if (next >= rows) {
            for (int j = 0; j < slots; ++j) {
                int c = tid + j * T;
                if (c < vecs) {
                    float4 v = s4[j * T + tid];
                    yr[c] = make_float4(expf(v.x - m) * r, expf(v.y - m) * r, expf(v.z - m) * r, expf(v.w - m) * r);
                }
            }
            return;
        }
        const float4 *xn = (const float4 *)(x + (size_t)next * cols);
        float m2 = -INFINITY;
        for (int j0 = 0; j0 < slots; j0 += UV) {
            float4 v[UV], o[UV];
#pragma unroll
            for (int u = 0; u < UV; ++u) {
                int c = tid + (j0 + u) * T;
                o[u] = j0 + u < slots ? s4[(j0 + u) * T + tid] : ninf4();
                v[u] = c < vecs ? xn[c] : ninf4();
            }
#pragma unroll
            for (int u = 0; u < UV; ++u) {
                int c = tid + (j0 + u) * T;
                if (c < vecs) yr[c] = make_float4(expf(o[u].x - m) * r, expf(o[u].y - m) * r, expf(o[u].z - m) * r, expf(o[u].w - m) * r);
                if (j0 + u < slots) s4[(j0 + u) * T + tid] = v[u];
                m2 = max4(m2, v[u]);
            }
        }
        row = next;
        m = m2;
    }
}

// -------------------------------------------------------------------------------------------------

template <typename F>
static float time_us(F launch, int reps = 30) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.f);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static double max_diff(const std::vector<float> &a, const std::vector<float> &b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (double)fabsf(a[i] - b[i]));
    return d;
}

// a kernel of `kernel`'s form (one row a cluster of N blocks of 1024 / N threads), timed
template <int N, typename K>
static float run_cluster(K kernel, const float *x, float *y, int rows, int cols, const char *what) {
    const int T = 1024 / N;
    size_t smem = (size_t)((cols / 4 + T * N - 1) / (T * N)) * T * 16;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(rows * N);
    cfg.blockDim = dim3(T);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = N;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int active = 0;
    cudaOccupancyMaxActiveClusters(&active, kernel, &cfg);
    float us = time_us([&] { CHECK(cudaLaunchKernelEx(&cfg, kernel, (const float *)x, y, cols)); });
    if (what) printf("  (%s: %zu bytes of shared memory a block, %d clusters active at once)\n", what, smem, active);
    return us;
}

template <int N, int UV>
static float run_rows(const float *x, float *y, int rows, int cols) {
    char what[32];
    snprintf(what, sizeof what, "N=%d UV=%d", N, UV);
    return run_cluster<N>(softmax_rows<N, UV>, x, y, rows, cols, what);
}

template <int N, int G>
static float run_async(const float *x, float *y, int rows, int cols) {
    return run_cluster<N>(softmax_rows_async<N, G>, x, y, rows, cols, nullptr);
}

int main(int argc, char **argv) {
    int rows = argc > 2 ? atoi(argv[1]) : 2048, cols = argc > 2 ? atoi(argv[2]) : 50260; /* a multiple of 4 */
    size_t n = (size_t)rows * cols, bytes = n * sizeof(float);
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs, %zu KB shared a block at most; softmax %d x %d f32\n", prop.name, prop.multiProcessorCount,
           prop.sharedMemPerBlockOptin / 1024, rows, cols);
    std::vector<float> hx(n);
    srand(1);
    for (size_t i = 0; i < n; ++i) hx[i] = (float)rand() / RAND_MAX * 8.f - 4.f;
    float *x, *y, *z;
    CHECK(cudaMalloc(&x, bytes));
    CHECK(cudaMalloc(&y, bytes));
    CHECK(cudaMalloc(&z, bytes));
    CHECK(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
    double gb = 2.0 * bytes / 1e9;

    float copy = time_us([&] { CHECK(cudaMemcpyAsync(z, x, bytes, cudaMemcpyDeviceToDevice)); });
    printf("memcpy       %8.1f us  %6.0f GB/s\n", copy, gb / copy * 1e6);

    size_t smem1 = (size_t)((cols / 4 + 1023) / 1024) * 1024 * 16;
    CHECK(cudaFuncSetAttribute(softmax_pipe<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
    CHECK(cudaFuncSetAttribute(softmax_pipe<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
    float one = run_rows<1, 4>(x, y, rows, cols);
    std::vector<float> ref(n), out(n);
    CHECK(cudaMemcpy(ref.data(), y, bytes, cudaMemcpyDeviceToHost));
    // the reference itself against double precision on a few rows
    double worst = 0;
    for (int r = 0; r < rows; r += rows / 7 + 1) {
        double mx = -1e30, s = 0;
        for (int c = 0; c < cols; ++c) mx = std::max(mx, (double)hx[(size_t)r * cols + c]);
        for (int c = 0; c < cols; ++c) s += exp((double)hx[(size_t)r * cols + c] - mx);
        for (int c = 0; c < cols; ++c) {
            double e = exp((double)hx[(size_t)r * cols + c] - mx) / s;
            worst = std::max(worst, fabs(e - ref[(size_t)r * cols + c]) / e);
        }
    }
    printf("one          %8.1f us  %6.0f GB/s  %3.0f %% of memcpy  (relative error against f64 %.2g)\n", one,
           gb / one * 1e6, 100.0 * copy / one, worst);

    auto report = [&](const char *name, float us) {
        CHECK(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost));
        printf("%-12s %8.1f us  %6.0f GB/s  %3.0f %% of memcpy  (max |diff| against one %.2g)\n", name, us, gb / us * 1e6,
               100.0 * copy / us, max_diff(out, ref));
        CHECK(cudaMemset(y, 0, bytes));
    };
    CHECK(cudaMemset(y, 0, bytes));
    report("one UV=2", run_rows<1, 2>(x, y, rows, cols));
    report("cl2", run_rows<2, 4>(x, y, rows, cols));
    report("cl4", run_rows<4, 4>(x, y, rows, cols));
    report("cl4 UV=2", run_rows<4, 2>(x, y, rows, cols));
    report("cl8", run_rows<8, 4>(x, y, rows, cols));
    report("cl4 async G=1", run_async<4, 1>(x, y, rows, cols));
    report("cl4 async G=2", run_async<4, 2>(x, y, rows, cols));
    report("cl4 async G=4", run_async<4, 4>(x, y, rows, cols));
    report("cl2 async G=2", run_async<2, 2>(x, y, rows, cols));
    report("cl8 async G=2", run_async<8, 2>(x, y, rows, cols));
    report("one async G=1", run_async<1, 1>(x, y, rows, cols));
    report("one async G=2", run_async<1, 2>(x, y, rows, cols));
    report("one async G=4", run_async<1, 4>(x, y, rows, cols));
    report("one async G=8", run_async<1, 8>(x, y, rows, cols));
    report("cl2 async G=4", run_async<2, 4>(x, y, rows, cols));
    report("cl4 again", run_rows<4, 4>(x, y, rows, cols));
    int grid = std::min(rows, prop.multiProcessorCount);
    report("pipe4", time_us([&] { softmax_pipe<4><<<grid, 1024, smem1>>>(x, y, rows, cols); }));
    report("pipe2", time_us([&] { softmax_pipe<2><<<grid, 1024, smem1>>>(x, y, rows, cols); }));
    report("one again", run_rows<1, 4>(x, y, rows, cols));
    return 0;
}
