// Design probe (not part of pt2): softmax over rows kept in shared memory by persistent blocks that
// copy the next row in while they write the current one.
//
//   one   one block a row, the row copied into shared memory by cp.async in one group (the best
//         one-block form of long_rows.cu, 84 % of memcpy for 2048 x 50260 f32)
//   pipeG persistent blocks (as many as fit an SM): the output loop of row r reads each slot of
//         shared memory, stores its output and issues the cp.async of row r + grid's vector into the
//         same slot (a thread reads and writes only its own slots, so no barrier guards them); the
//         copies are committed in G groups, and row r + grid's max takes each group as it lands
//
// (cols a multiple of 4; 50260 stands for 50257, 16412 for 16411)
// nvcc -O3 -arch=sm_90 -o pipe_rows pipe_rows.cu && ./pipe_rows [rows cols threads]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                 \
    do {                                                                                         \
        cudaError_t err_ = (x);                                                                  \
        if (err_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

template <bool Max>
__device__ float block_reduce(float v, float *scratch) {
    for (int o = 16; o > 0; o /= 2) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = Max ? fmaxf(v, w) : v + w;
    }
    int warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float t = scratch[0];
    for (int i = 1; i < warps; ++i) t = Max ? fmaxf(t, scratch[i]) : t + scratch[i];
    __syncthreads();
    return t;
}

__device__ inline float max4(float m, float4 v) { return fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w)); }

__device__ inline void cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int K>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(K) : "memory"); }

// wait until group g of G has landed (groups committed in order, none after them)
template <int G>
__device__ inline void wait_group(int g) {
#pragma unroll
    for (int k = 0; k < G; ++k)
        if (g == k) {
            if (G - 1 - k == 0) cp_async_wait<0>();
            else if (G - 1 - k == 1) cp_async_wait<1>();
            else if (G - 1 - k == 2) cp_async_wait<2>();
            else if (G - 1 - k == 3) cp_async_wait<3>();
            else if (G - 1 - k == 4) cp_async_wait<4>();
            else if (G - 1 - k == 5) cp_async_wait<5>();
            else if (G - 1 - k == 6) cp_async_wait<6>();
            else cp_async_wait<7>();
        }
}

// the softmax of rows row0, row0 + step, ... (step 0: row0 alone)
template <int G>
__device__ void rows_pipe(const float *__restrict__ x, float *__restrict__ y, int rows, int cols, int row, int step) {
    extern __shared__ float4 s4[];
    __shared__ float scratch[32];
    const int T = blockDim.x, tid = threadIdx.x;
    const int vecs = cols / 4, slots = (vecs + T - 1) / T, per = (slots + G - 1) / G;
    if (row >= rows) return;
    {
        const float4 *xr = (const float4 *)(x + (size_t)row * cols);
        for (int g = 0; g < G; ++g) {
            for (int j = g * per; j < (g + 1) * per && j < slots; ++j) {
                int c = tid + j * T;
                if (c < vecs) cp_async16(&s4[j * T + tid], &xr[c]);
            }
            cp_async_commit();
        }
    }
    for (;;) {
        float m = -INFINITY;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            wait_group<G>(g);
            for (int j = g * per; j < (g + 1) * per && j < slots; ++j) {
                int c = tid + j * T;
                if (c < vecs) m = max4(m, s4[j * T + tid]);
            }
        }
        m = block_reduce<true>(m, scratch);
        float sum = 0.f;
        for (int j = 0; j < slots; ++j) {
            if (tid + j * T < vecs) {
                float4 v = s4[j * T + tid];
                sum += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
            }
        }
        float r = 1.f / block_reduce<false>(sum, scratch);
        int next = step ? row + step : rows;
        float4 *yr = (float4 *)(y + (size_t)row * cols);
        const float4 *xn = (const float4 *)(x + (size_t)next * cols);
        bool more = next < rows;
        for (int g = 0; g < G; ++g) {
            for (int j = g * per; j < (g + 1) * per && j < slots; ++j) {
                int c = tid + j * T;
                if (c < vecs) {
                    float4 v = s4[j * T + tid];
                    yr[c] = make_float4(__expf(v.x - m) * r, __expf(v.y - m) * r, __expf(v.z - m) * r, __expf(v.w - m) * r);
                    if (more) cp_async16(&s4[j * T + tid], &xn[c]);
                }
            }
            cp_async_commit();
        }
        if (!more) return;
        row = next;
    }
}

template <int G>
__global__ void __launch_bounds__(1024) softmax_pipe(const float *__restrict__ x, float *__restrict__ y, int rows, int cols) {
    rows_pipe<G>(x, y, rows, cols, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(1024) softmax_one(const float *__restrict__ x, float *__restrict__ y, int rows, int cols) {
    rows_pipe<1>(x, y, rows, cols, blockIdx.x, 0);
}

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

int main(int argc, char **argv) {
    int rows = argc > 2 ? atoi(argv[1]) : 2048, cols = argc > 2 ? atoi(argv[2]) : 50260;
    int T = argc > 3 ? atoi(argv[3]) : 1024;
    size_t n = (size_t)rows * cols, bytes = n * sizeof(float);
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::vector<float> hx(n), ref(n), out(n);
    srand(1);
    for (size_t i = 0; i < n; ++i) hx[i] = (float)rand() / RAND_MAX * 8.f - 4.f;
    float *x, *y, *z;
    CHECK(cudaMalloc(&x, bytes));
    CHECK(cudaMalloc(&y, bytes));
    CHECK(cudaMalloc(&z, bytes));
    CHECK(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
    double gb = 2.0 * bytes / 1e9;
    float copy = time_us([&] { CHECK(cudaMemcpyAsync(z, x, bytes, cudaMemcpyDeviceToDevice)); });
    size_t smem = (size_t)((cols / 4 + T - 1) / T) * T * 16;
    printf("%s, %d SMs; softmax %d x %d f32, %d threads a block, %zu bytes of shared memory a block\n", prop.name,
           prop.multiProcessorCount, rows, cols, T, smem);
    printf("memcpy      %8.1f us  %6.0f GB/s\n", copy, gb / copy * 1e6);

    // a reference in double precision for a few rows
    auto check = [&](const char *name, float us) {
        CHECK(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < rows; r += rows / 13 + 1) {
            double mx = -1e30, s = 0;
            for (int c = 0; c < cols; ++c) mx = std::max(mx, (double)hx[(size_t)r * cols + c]);
            for (int c = 0; c < cols; ++c) s += exp((double)hx[(size_t)r * cols + c] - mx);
            for (int c = 0; c < cols; ++c) {
                double e = exp((double)hx[(size_t)r * cols + c] - mx) / s;
                worst = std::max(worst, fabs(e - out[(size_t)r * cols + c]) / e);
            }
        }
        printf("%-10s %8.1f us  %6.0f GB/s  %3.0f %% of memcpy  (relative error %.2g)\n", name, us, gb / us * 1e6,
               100.0 * copy / us, worst);
        CHECK(cudaMemset(y, 0, bytes));
    };
    CHECK(cudaFuncSetAttribute(softmax_one, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    check("one", time_us([&] { softmax_one<<<rows, T, smem>>>(x, y, rows, cols); }));
    auto pipe = [&](auto kernel, const char *name) {
        CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int per_sm = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, T, smem));
        int grid = std::min(rows, per_sm * prop.multiProcessorCount);
        char what[64];
        snprintf(what, sizeof what, "%s (%d/SM)", name, per_sm);
        check(what, time_us([&] { kernel<<<grid, T, smem>>>(x, y, rows, cols); }));
    };
    pipe(softmax_pipe<1>, "pipe1");
    pipe(softmax_pipe<2>, "pipe2");
    pipe(softmax_pipe<4>, "pipe4");
    pipe(softmax_pipe<8>, "pipe8");
    check("one again", time_us([&] { softmax_one<<<rows, T, smem>>>(x, y, rows, cols); }));
    return 0;
}
