"""kernelop's own kernels for the host glue between the launches of an op (Note [several launches],
docs/spec-format.md 4.1): a sum over one axis with a cast (Liger-Kernel's ``dW = partials.sum(dim=0).to(W.dtype)``)
and a cast copy (``.to(dtype)``). Each is a KernelSpec of CUDA C++ that NVRTC compiles, so an op using one runs where
Python and every DSL are absent (packages, the C ABI). Tensors are named ``x`` (read) and ``y`` (written): a Launch
renames them to the op's (``Launch(sum_dim(...), from_={"x": "part", "y": "grad_w"})``). Fills and whole copies of
an input need no kernel: they are output inits (Note [initialised outputs])."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ._spec import Custom, Expr, InputDecl, KernelSpec, OutputDecl, ReduceDims, SameAs, _dtype_name

# Accumulation in float for 16-bit and float types, double for double, 64-bit for integers; the result converted
# to the output's type as PyTorch's .to() converts it (round to nearest even; integers truncate toward zero).
_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <class T> struct KopAcc { using type = float; };
template <> struct KopAcc<double> { using type = double; };
template <> struct KopAcc<signed char> { using type = long long; };
template <> struct KopAcc<unsigned char> { using type = long long; };
template <> struct KopAcc<short> { using type = long long; };
template <> struct KopAcc<int> { using type = long long; };
template <> struct KopAcc<long long> { using type = long long; };
template <class A, class T> __device__ inline A kop_to(T v) { return static_cast<A>(v); }
template <> __device__ inline float kop_to<float, __half>(__half v) { return __half2float(v); }
template <> __device__ inline float kop_to<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T, class A> __device__ inline T kop_from(A v) { return static_cast<T>(v); }
template <> __device__ inline __half kop_from<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 kop_from<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ inline __half kop_from<__half, double>(double v) { return __double2half(v); }
template <> __device__ inline __nv_bfloat16 kop_from<__nv_bfloat16, double>(double v) {
  return __double2bfloat16(v);
}

// y[o, i] = sum over r of x[o, r, i] (x viewed as [outer, reduced, inner], contiguous): lanes of a warp take
// consecutive i (coalesced), the block's 8 rows of threads split r and add up in shared memory.
template <class T, class U>
__global__ void kop_sum_dim(const T* __restrict__ x, long long outer, long long reduced, long long inner,
                            U* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  __shared__ A partial[8][33];
  const long long i = blockIdx.x * 32LL + threadIdx.x;
  for (long long o = blockIdx.y; o < outer; o += gridDim.y) {
    A acc = A(0);
    if (i < inner) {
      const T* base = x + o * reduced * inner + i;
      for (long long r = threadIdx.y; r < reduced; r += blockDim.y) acc += kop_to<A>(base[r * inner]);
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (int k = 1; k < (int)blockDim.y; ++k) acc += partial[k][threadIdx.x];
      y[o * inner + i] = kop_from<U>(acc);
    }
    __syncthreads();
  }
}

// y = x converted element by element.
template <class T, class U>
__global__ void kop_cast(const T* __restrict__ x, long long n, U* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = kop_from<U>(kop_to<A>(x[i]));
}
"""

# The element types the glue takes (the C++ DType table names; float8 and bool have no arithmetic here).
GLUE_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64")


def _dtype(value: Any, where: str) -> str:
    name = _dtype_name(value)
    if name not in GLUE_DTYPES:
        raise TypeError(f"{where}: kernelop's glue kernels take {', '.join(GLUE_DTYPES)}; got {name}")
    return name


def _types(in_dtype: Any, out_dtype: Any, where: str) -> Dict[str, Sequence[Any]]:
    return {"T": [_dtype(in_dtype, where)], "U": [_dtype(out_dtype, where)]}


def sum_dim(dim: int, rank: int, in_dtype: Any, out_dtype: Any, keepdim: bool = False) -> KernelSpec:
    """``y = x.sum(dim, keepdim).to(out_dtype)`` for a contiguous ``x`` of rank ``rank`` (0 < rank <= 8, ``dim``
    in [-rank, rank)); a sum over no element is 0, as torch's."""
    where = f"kernelop glue sum_dim(dim={dim!r}, rank={rank!r})"
    if type(rank) is not int or not 1 <= rank <= 8:
        raise ValueError(f"{where}: rank must be an int in 1..8")
    if type(dim) is not int or not -rank <= dim < rank:
        raise ValueError(f"{where}: dim must be an int in [{-rank}, {rank})")
    d = dim % rank
    before, after = list(range(d)), list(range(d + 1, rank))
    outer = f"numel_except(x, {', '.join(str(a) for a in [d] + after)})"
    inner = f"numel_except(x, {', '.join(str(a) for a in before + [d])})"
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_sum_dim<T, U>", type_params=_types(in_dtype, out_dtype, where),
        inputs=[InputDecl("x", "T")],
        outputs=[OutputDecl("y", ReduceDims("x", (d,), keepdim=keepdim), dtype="U")],
        requires=[f"rank(x) == {rank}"],
        params=["x", Expr(outer, int64=True), Expr(f"dim(x, {d})", int64=True), Expr(inner, int64=True), "y"],
        geometry=Custom(grid=[f"cdiv({inner}, 32)", f"min({outer}, 65535)", 1], block=[32, 8, 1]))


def cast(in_dtype: Any, out_dtype: Any) -> KernelSpec:
    """``y = x.to(out_dtype)`` for a contiguous ``x`` of any rank."""
    where = "kernelop glue cast"
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_cast<T, U>", type_params=_types(in_dtype, out_dtype, where),
        inputs=[InputDecl("x", "T")], outputs=[OutputDecl("y", SameAs("x"), dtype="U")],
        params=["x", Expr("numel(x)", int64=True), "y"],
        geometry=Custom(grid=["min(cdiv(numel(x), 256), 65535)"], block=[256]))


__all__: List[str] = ["GLUE_DTYPES", "cast", "sum_dim"]
