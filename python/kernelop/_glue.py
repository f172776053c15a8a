"""kernelop's own kernels for the host glue between the launches of an op (Note [several launches],
docs/spec-format.md 4.1): a sum over one axis with a cast (Liger-Kernel's ``dW = partials.sum(dim=0).to(W.dtype)``),
a sum of a whole tensor, a count of the elements that differ from a value (``(target != ignore_index).sum()``), a
division by a one-element tensor (a loss by a count) and a cast copy (``.to(dtype)``). Each is a KernelSpec of CUDA
C++ that NVRTC compiles, so an op using one runs where Python and every DSL are absent (packages, the C ABI).
Tensors are named ``x`` (read) and ``y`` (written): a Launch renames them to the op's (``Launch(sum_dim(...),
from_={"x": "part", "y": "grad_w"})``). Fills and whole copies of an input need no kernel: they are output inits
(Note [initialised outputs])."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Sequence

from ._spec import (Custom, Expr, FloatConst, InputDecl, KernelSpec, OutputDecl, ReduceDims, SameAs, ScalarInput,
                    _dtype_name, _r)

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

// The sum of v over a block of blockDim.x threads (a multiple of 32, at most 1024); the result in
// thread 0.
template <class A>
__device__ inline A kop_block_sum(A v) {
  __shared__ A warps[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : A(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

// y[0] = the sum of all of x (one block: the glue's sums are of partials and per-row values).
template <class T, class U>
__global__ void kop_sum_all(const T* __restrict__ x, long long n, U* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  A acc = A(0);
  for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += kop_to<A>(x[i]);
  acc = kop_block_sum(acc);
  if (threadIdx.x == 0) y[0] = kop_from<U>(acc);
}

// y[0] = how many elements of x differ from v: (x != v).sum() (one block).
template <class T, class U>
__global__ void kop_count_ne(const T* __restrict__ x, long long n, int v, U* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  const A value = kop_to<A>(kop_from<T>(static_cast<A>(v)));  // v as x's type holds it, as torch compares
  long long count = 0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) count += kop_to<A>(x[i]) != value;
  count = kop_block_sum(count);
  if (threadIdx.x == 0) y[0] = static_cast<U>(count);
}

// y = a / b[0] element by element, in a's accumulation type (b holds one element), b first
// converted to a's type as torch converts it (a bfloat16 tensor by 257 divides by 256).
template <class T, class B>
__global__ void kop_div(const T* __restrict__ a, long long n, const B* __restrict__ b,
                        T* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  const A d = kop_to<A>(kop_from<T>(static_cast<A>(kop_to<typename KopAcc<B>::type>(b[0]))));
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = kop_from<T>(kop_to<A>(a[i]) / d);
}

// y = x clamped to [lo, hi] element by element (a bound a flag leaves out is not applied), in x's
// type (x.clamp(min=1): a count that divides).
template <class T>
__global__ void kop_clamp(const T* __restrict__ x, long long n, float lo, int has_lo, float hi,
                          int has_hi, T* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  const A low = kop_to<A>(kop_from<T>(static_cast<A>(lo)));
  const A high = kop_to<A>(kop_from<T>(static_cast<A>(hi)));
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    A v = kop_to<A>(x[i]);
    if (has_lo && v < low) v = low;
    if (has_hi && v > high) v = high;
    y[i] = kop_from<T>(v);
  }
}

// y = x converted element by element.
template <class T, class U>
__global__ void kop_cast(const T* __restrict__ x, long long n, U* __restrict__ y) {
  using A = typename KopAcc<T>::type;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = kop_from<U>(kop_to<A>(x[i]));
}
// y = x.permute(P).contiguous(): y is contiguous of sizes s[0..R), x is read with strides t[0..R) per dim of y
// (x's strides permuted, any layout). A warp copies a row of y (its last dim) at a time: in 16-byte vectors when the
// row is contiguous in x too and both rows are aligned (a permutation that keeps the last dim in place, as RoPE's
// q.transpose(1, 2).contiguous()), element by element otherwise. The row's place in x is found with 32-bit
// divisions when the rows fit them.
template <class T, int R>
__global__ void kop_permute_copy(const T* __restrict__ x, long long rows, long long s0, long long s1, long long s2,
                                 long long s3, long long s4, long long s5, long long s6, long long s7, long long t0,
                                 long long t1, long long t2, long long t3, long long t4, long long t5, long long t6,
                                 long long t7, T* __restrict__ y) {
  const long long s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  const long long t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
  const long long inner = s[R - 1], step = t[R - 1];
  const int lane = threadIdx.x % 32;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  const bool narrow = rows < (1LL << 31);
  for (long long r = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    long long offset = 0;
    if (narrow) {
      unsigned rest = (unsigned)r;
#pragma unroll
      for (int d = R - 2; d >= 0; --d) {
        const unsigned size = (unsigned)s[d];
        offset += (long long)(rest % size) * t[d];
        rest /= size;
      }
    } else {
      long long rest = r;
#pragma unroll
      for (int d = R - 2; d >= 0; --d) {
        offset += (rest % s[d]) * t[d];
        rest /= s[d];
      }
    }
    const T* from = x + offset;
    T* to = y + r * inner;
    if (step == 1 && (inner * (long long)sizeof(T)) % 16 == 0 &&
        (((unsigned long long)from | (unsigned long long)to) % 16) == 0) {
      const uint4* f = reinterpret_cast<const uint4*>(from);
      uint4* o = reinterpret_cast<uint4*>(to);
      const long long n = inner * (long long)sizeof(T) / 16;
      for (long long i = lane; i < n; i += 32) o[i] = f[i];
    } else {
      for (long long i = lane; i < inner; i += 32) to[i] = from[i * step];
    }
  }
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


def sum_all(in_dtype: Any, out_dtype: Any) -> KernelSpec:
    """``y = x.sum().to(out_dtype)`` for a contiguous ``x`` of any rank: a tensor of rank 0 (one block of 1024
    threads sums it: the glue's sums are of partials and per-row values, not of activations)."""
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_sum_all<T, U>",
        type_params=_types(in_dtype, out_dtype, "kernelop glue sum_all"),
        inputs=[InputDecl("x", "T")], outputs=[OutputDecl("y", [], dtype="U")],
        params=["x", Expr("numel(x)", int64=True), "y"], geometry=Custom(grid=[1, 1, 1], block=[1024, 1, 1]))


def count_ne(in_dtype: Any, value: Any, out_dtype: Any = "int64") -> KernelSpec:
    """``y = (x != value).sum().to(out_dtype)`` for a contiguous ``x``: a count of rank 0 (Liger's cross entropy
    counts the rows whose target is not ``ignore_index``). ``value``: an int, or the name of an int scalar input
    the launch reads as ``v`` (``Launch(count_ne(..., "v"), from_={"v": "ignore_index"})``)."""
    where = "kernelop glue count_ne"
    inputs: List[Any] = [InputDecl("x", "T")]
    if isinstance(value, str):
        inputs.append(ScalarInput("v", int))
        v: Any = "v"
    elif isinstance(value, int) and not isinstance(value, bool) and -2 ** 31 <= value < 2 ** 31:
        v = Expr(str(value))  # an int, as an int scalar input is passed
    else:
        raise TypeError(f"{where}: value must be a 32-bit int or the name of an int scalar, got "
                        f"{type(value).__name__} {str(value)[:40]}")
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_count_ne<T, U>", type_params=_types(in_dtype, out_dtype, where),
        inputs=inputs, outputs=[OutputDecl("y", [], dtype="U")],
        params=["x", Expr("numel(x)", int64=True), v, "y"], geometry=Custom(grid=[1, 1, 1], block=[1024, 1, 1]))


def div(a_dtype: Any, b_dtype: Any) -> KernelSpec:
    """``y = a / b`` for a contiguous ``a`` of a floating dtype and a ``b`` of one element (a count, a scale): ``y``
    has ``a``'s shape and dtype (torch's type promotion for a tensor divided by a tensor of rank 0)."""
    where = "kernelop glue div"
    a, b = _dtype(a_dtype, where), _dtype(b_dtype, where)
    if a not in ("float32", "float16", "bfloat16", "float64"):
        raise TypeError(f"{where}: divides a floating tensor (its dtype is the result's), got {a}")
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_div<T, B>", type_params={"T": [a], "B": [b]},
        inputs=[InputDecl("a", "T"), InputDecl("b", "B")], outputs=[OutputDecl("y", SameAs("a"))],
        requires=["numel(b) == 1"], params=["a", Expr("numel(a)", int64=True), "b", "y"],
        geometry=Custom(grid=["max(min(cdiv(numel(a), 256), 65535), 1)"], block=[256]))


def clamp(dtype: Any, lo: Any = None, hi: Any = None) -> KernelSpec:
    """``y = x.clamp(min=lo, max=hi)`` for a contiguous ``x``, in its dtype: ``lo`` and ``hi`` are constants (None:
    no bound; at least one given), converted to x's type as torch converts them (``n.clamp(min=1)``: a count that
    divides, nonzero)."""
    where = "kernelop glue clamp"
    name = _dtype(dtype, where)
    for what, v in (("lo", lo), ("hi", hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or
                              struct.unpack("f", struct.pack("f", v))[0] != v):
            raise TypeError(f"{where}: {what} must be an int or a float constant a 32-bit float holds, got "
                            f"{type(v).__name__} {str(v)[:40]}")
    if lo is None and hi is None:
        raise ValueError(f"{where}: give lo, hi or both")
    bound = [Expr("1") if v is not None else Expr("0") for v in (lo, hi)]
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name="kop_clamp<T>", type_params={"T": [name]},
        inputs=[InputDecl("x", "T")], outputs=[OutputDecl("y", SameAs("x"))],
        params=["x", Expr("numel(x)", int64=True), FloatConst(lo if lo is not None else 0), bound[0],
                FloatConst(hi if hi is not None else 0), bound[1], "y"],
        geometry=Custom(grid=["max(min(cdiv(numel(x), 256), 65535), 1)"], block=[256]))


def permute_copy(perm: Sequence[int], dtype: Any) -> KernelSpec:
    """``y = x.permute(perm).contiguous()`` for an ``x`` of rank ``len(perm)`` (2 to 8) laid out any way (a
    strided input: the copy reads it with its own strides, so one of another layout is copied once)."""
    where = f"kernelop glue permute_copy(perm={_r(perm)})"
    rank = len(perm) if isinstance(perm, (list, tuple)) else -1
    if not 2 <= rank <= 8 or any(type(p) is not int for p in perm) or sorted(perm) != list(range(rank)):
        raise ValueError(f"{where}: perm must be a permutation of 0..n-1 for a rank n in 2..8")
    name = _dtype(dtype, where)
    sizes = [Expr(f"dim(x, {p})", int64=True) for p in perm] + [Expr("1", int64=True)] * (8 - rank)
    strides = [Expr(f"stride(x, {p})", int64=True) for p in perm] + [Expr("0", int64=True)] * (8 - rank)
    rows = f"numel_except(x, {perm[-1]})"
    params: List[Any] = ["x", Expr(rows, int64=True), *sizes, *strides, "y"]
    return KernelSpec(
        kernel_source=_SOURCE, kernel_name=f"kop_permute_copy<T, {rank}>", type_params={"T": [name]},
        inputs=[InputDecl("x", "T", strided=True)],
        outputs=[OutputDecl("y", [f"dim(x, {p})" for p in perm])],
        requires=[f"rank(x) == {rank}"], params=params,
        geometry=Custom(grid=[f"max(min(cdiv({rows}, 8), 1048576), 1)"], block=[256]))


__all__: List[str] = ["GLUE_DTYPES", "cast", "clamp", "count_ne", "div", "permute_copy", "sum_all", "sum_dim"]
