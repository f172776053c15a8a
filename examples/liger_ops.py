"""Liger-Kernel's Triton ops as kernelop ops, registered from Liger's own host functions (docs/triton.md, "Bring a
Triton library"). Liger-Kernel 0.8.5 comes from PyPI into .deps/liger (scripts/fetch-liger); nothing of it is
committed. tests/python/test_liger.py checks these against Liger's own autograd Functions and torch;
bench/liger_bench.py times them.

- RMSNorm: ``rms_norm_forward`` / ``rms_norm_backward``, unchanged. The backward's per-SM partials of dW are the op's
  scratch and ``_dW.sum(dim=0).to(W.dtype)`` a launch of kernelop's own sum kernel.
- SwiGLU: ``swiglu_forward`` / ``swiglu_backward``, unchanged; the backward gives Liger's function copies of ``a``
  and ``b``, which it writes over (no copy when nothing else holds them: docs/autograd.md, donated inputs).
- RoPE: ``rope_forward`` / ``rope_backward``, unchanged. Their ``q.transpose(1, 2).contiguous()`` is a copy by
  kernelop's glue (reading q with its strides: a q that is itself a transposed view is copied once), which the kernel
  then rotates in place; the returned ``q.transpose(1, 2)`` is an output returned as a permutation (OutputDecl
  permute). The op leaves q and k intact: Liger's rotates them in place when their transpose is contiguous.
- Cross entropy: ``cross_entropy_forward`` line for line, for a mean loss, and ``cross_entropy_backward``, by
  default with the deviations their docstrings give (no ``.item()`` host sync: the count of kept rows stays on the
  device, so the op can be captured in a CUDA graph), or with ``host_sync=True`` as Liger's: ``n_non_ignore =
  target_mask.sum().item()`` read at launch, and Liger's ``cross_entropy_backward`` unchanged (its ``torch.equal(
  grad_output, 1.0)`` skips its kernel when the loss is the last layer: no pass over the logits). The gradient goes
  over a copy of the logits, or over the logits as Liger's (``in_place=True``: ``Tensor(a!)`` with a backward).

Each ``launch_fn`` is what the library's autograd Function calls; the wrappers only say which of its returns are the
op's outputs and pass what the Function's ctx holds.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".deps", "liger"))

import kernelop as ko  # noqa: E402


def _ops(name):
    import importlib
    return importlib.import_module(f"liger_kernel.ops.{name}")


def rms_norm_fwd(X: torch.Tensor, W: torch.Tensor, eps: float):
    """Liger's rms_norm_forward as LigerRMSNormFunction.forward calls it (offset 0, Llama casting, no row mode)."""
    Y, _, RSTD, _, _, _ = _ops("rms_norm").rms_norm_forward(X, W, eps, 0.0, "llama", False)
    return Y, RSTD


def rms_norm_bwd(grad_Y_ptr: torch.Tensor, X: torch.Tensor, W: torch.Tensor, RSTD_ptr: torch.Tensor):
    """LigerRMSNormFunction.backward line for line: X as its forward saved it (rms_norm_forward's X.view(-1, dim)),
    BLOCK_SIZE and num_warps as its ctx holds them (calculate_settings of the hidden size), in place as Liger's
    default, over a copy of the incoming gradient: no zeroed dX, and no copy either when autograd gave the gradient
    to this backward alone (docs/autograd.md, donated inputs). Liger's rms_norm_backward allocates per-SM partials
    of dW (scratch) and ends with _dW.sum(dim=0).to(W.dtype) (kernelop's glue, a launch of the op)."""
    from liger_kernel.ops.utils import calculate_settings
    X = X.view(-1, X.shape[-1])
    BLOCK_SIZE, num_warps = calculate_settings(X.shape[-1])
    return _ops("rms_norm").rms_norm_backward(grad_Y_ptr.clone(), X, W, RSTD_ptr, 0.0, "llama", BLOCK_SIZE,
                                              num_warps, True, False)


def rms_norm(dtype=torch.float32, op_name="liger::rms_norm", specialize=None):
    """RMSNorm forward and backward for `dtype`, recorded (``.register()`` it, or ``.build_package(...)``)."""
    return ko.record_plugin(ko.triton(rms_norm_fwd, specialize=specialize), op_name=op_name,
                            example_inputs=(torch.empty(4, 4096, dtype=dtype), torch.empty(4096, dtype=dtype)),
                            backward=ko.Backward(["X", "W"], ko.triton(rms_norm_bwd)))


def swiglu_fwd(a: torch.Tensor, b: torch.Tensor, gate_multiplier: float = 1.0) -> torch.Tensor:
    """Liger's swiglu_forward; it returns (a, b, c) for its autograd Function to save: the op's output is c. Its
    kernel reads as many rows of b as a has, which Liger assumes; the assert makes that the op's requirement (and the
    op rank-free: b.view(-1, n_cols) then needs no condition of its own)."""
    assert a.shape == b.shape
    return _ops("swiglu").swiglu_forward(a, b, gate_multiplier)[2]


def swiglu_bwd(a: torch.Tensor, b: torch.Tensor, grad_c_ptr: torch.Tensor, gate_multiplier: float = 1.0):
    """Liger's swiglu_backward writes the gradients over a and b; it gets copies, so the saved a and b stay (the
    copies are a's and b's own buffers when nothing else can see them: docs/autograd.md, donated inputs)."""
    return _ops("swiglu").swiglu_backward(a.clone(), b.clone(), grad_c_ptr, gate_multiplier)


def swiglu(dtype=torch.float32, op_name="liger::swiglu", hidden=(4096, 11008, 14336)):
    """SwiGLU forward and backward for `dtype`, compiled for the hidden sizes listed (its kernels take n_cols as a
    constexpr)."""
    shape = (2, 3, 4096)
    return ko.record_plugin(ko.triton(swiglu_fwd, specialize=list(hidden)), op_name=op_name,
                            example_inputs=(torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)),
                            backward=ko.Backward(["a", "b"], ko.triton(swiglu_bwd)))  # the forward's specialize


def rope_fwd(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Liger's rope_forward as LigerRopeFunction.forward calls it (no position_ids, unsqueeze_dim 1, rotary_dim from
    cos); it returns (q, k, cos, sin) for its autograd Function to save: the op's outputs are q and k. cos and sin are
    (seq_len, rotary_dim), shared by the batch. The asserts are what its kernel assumes (one cos and sin row per
    position, k's batch, positions and head size q's): the op's requirements."""
    assert cos.shape == sin.shape and cos.shape[0] == q.shape[2]
    assert k.shape[0] == q.shape[0] and k.shape[2] == q.shape[2] and k.shape[3] == q.shape[3]
    return _ops("rope").rope_forward(q, k, cos, sin)[:2]


def rope_bwd(grad_q_embed: torch.Tensor, grad_k_embed: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Liger's rope_backward, unchanged: the gradients rotated back (cos and sin are the forward's)."""
    return _ops("rope").rope_backward(grad_q_embed, grad_k_embed, cos, sin)


def rope_bwd_in_place(grad_q_out: torch.Tensor, grad_k_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """rope_bwd for the op in place: it takes the gradients of the values the op left in q and k (docs/autograd.md,
    written results) and gives those of q and k before."""
    return rope_bwd(grad_q_out, grad_k_out, cos, sin)


def rope(dtype=torch.float32, op_name="liger::rope", batches=(1, 2, 4, 8), q_heads=(32,), kv_heads=(8,),
         head_dims=(128,), in_place=False):
    """RoPE forward and backward for `dtype`: ``q_embed, k_embed = op(q, k, cos, sin)``, q (batch, q_heads, seq,
    head_dim), k (batch, kv_heads, seq, head_dim), cos and sin (seq, head_dim). Liger's kernel takes the batch, the
    head counts and the head size as constexprs: kernelop compiles the values listed (a model's heads and head size,
    the batch sizes it runs). ``in_place``: as Liger's on HF's q and k (transposed views of the projections,
    ``proj.view(b, s, h, d).transpose(1, 2)``, which the op requires): ``op(q, k, cos, sin)`` rotates them in place,
    and they are its results (recorded from examples laid out so: docs/triton.md, example layouts)."""
    if in_place not in (True, False):
        raise TypeError(f"rope: in_place must be True or False, got {in_place!r}")

    def classes(q, k):
        return {f"dim({q}, 0)": list(batches), f"dim({q}, -3)": list(q_heads), f"dim({k}, -3)": list(kv_heads),
                f"dim({q}, -1)": list(head_dims)}
    trig = (torch.empty(5, 128, dtype=dtype), torch.empty(5, 128, dtype=dtype))
    if in_place:  # HF's layout: the kernel then rotates q and k themselves
        examples = (torch.empty(2, 5, 32, 128, dtype=dtype).transpose(1, 2),
                    torch.empty(2, 5, 8, 128, dtype=dtype).transpose(1, 2)) + trig
        return ko.record_plugin(ko.triton(rope_fwd, specialize=classes("q", "k")), op_name=op_name,
                                example_inputs=examples, backward=ko.Backward(["q", "k"], ko.triton(
                                    rope_bwd_in_place, specialize=classes("grad_q_out", "grad_k_out"))))
    examples = (torch.empty(2, 32, 5, 128, dtype=dtype), torch.empty(2, 8, 5, 128, dtype=dtype)) + trig
    return ko.record_plugin(ko.triton(rope_fwd, specialize=classes("q", "k"), outputs=["q_embed", "k_embed"]),
                            op_name=op_name, example_inputs=examples,
                            backward=ko.Backward(["q", "k"], ko.triton(
                                rope_bwd, specialize=classes("grad_q_embed", "grad_k_embed"))))


def ce_forward_in_place(synced: bool):
    """Liger's cross_entropy_forward line for line for a mean loss with no weight, z-loss, label smoothing, softcap
    or accuracy (as LigerCrossEntropyFunction.apply(x, target, None, ignore_index) calls it). As Liger's, the kernel
    writes the gradient over the logits it is given (no copy: Liger's memory saving); the op's schema says so
    (``Tensor(a!) _input``): the logits' version is bumped, a leaf that requires grad is refused, and the value left
    in them has no gradient (docs/autograd.md). Liger's asserts that targets are in [0, V) are host syncs that only
    check and are left out: a target outside [0, V) that is not ignore_index makes Liger's kernel read and write
    outside its row (torch's own loss asserts on the device), so targets must be in range.

    ``synced``: Liger's ``n_non_ignore = target_mask.sum().item()`` as it is, read at launch (ko.triton(...,
    host_sync=True)) into the kernel's arguments; the kernel divides by it as Liger's does, and a mean over no kept
    row is 0, as Liger's. Otherwise (graph-safe, one deviation) the count stays on the device: the kernel runs its
    "sum" reduction (each term of "mean" is the "sum" one divided by the count) and kernelop's glue divides the
    summed loss by the count; the backward divides the incoming gradient by it before its kernel (the logits hold
    the sum's gradient, Liger's the mean's); a mean over no kept row is nan, as torch's, and its gradient 0."""
    def ce_fwd_in_place(_input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100):
        import triton
        ce = _ops("cross_entropy")
        BT, V = _input.shape
        assert target.shape == (BT,)  # what the kernel assumes (one target per row): the op's requirement
        n_rows = BT
        BLOCK_SIZE = min(ce.MAX_FUSED_SIZE, triton.next_power_of_2(V))
        loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
        target_mask = target != ignore_index
        n_non_ignore = target_mask.sum().item() if synced else target_mask.sum()
        ce.liger_cross_entropy_kernel[(n_rows,)](
            X_ptr=_input, X_stride=_input.stride(-2), Y_ptr=target, Y_stride=target.stride(-1), weight_ptr=None,
            loss_ptr=loss_1d, z_loss_ptr=None, loss_stride=loss_1d.stride(-1), token_accuracy_ptr=None,
            token_accuracy_stride=0, predicted_tokens_ptr=None, predicted_tokens_stride=0, n_cols=V,
            n_non_ignore=n_non_ignore if synced else 1, sum_non_ignore_weight=n_non_ignore if synced else 1,
            ignore_index=ignore_index, weight_sum=0.0, lse_square_scale=0.0, label_smoothing=0.0,
            reduction="mean" if synced else "sum", softcap=None, RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False,
            RETURN_PREDICTED_TOKENS=False, BLOCK_SIZE=BLOCK_SIZE, HAS_WEIGHT=False, HAS_SOFTCAPPING=False,
            HAS_GRADIENTS=True, num_warps=32)
        if synced:
            return torch.sum(loss_1d)
        loss = torch.sum(loss_1d) / n_non_ignore
        return loss, n_non_ignore
    return ce_fwd_in_place


ce_fwd_in_place = ce_forward_in_place(False)
ce_fwd_in_place_synced = ce_forward_in_place(True)


def ce_fwd(_input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100):
    """ce_fwd_in_place over a copy of the logits: the op leaves its input intact (the functional op)."""
    grad = _input.clone()
    loss, n_non_ignore = ce_fwd_in_place(grad, target, ignore_index)
    return loss, grad, n_non_ignore


def ce_bwd(grad_loss: torch.Tensor, grad: torch.Tensor, n_non_ignore: torch.Tensor):
    """Liger's cross_entropy_backward for a scalar loss: element_mul_kernel scales the gradient the forward wrote by
    grad_output. Deviations: ``torch.equal(grad_output, 1.0)`` (a host sync that skips the scaling) is left out; the
    scale is grad_output / n_non_ignore (the forward's deferred mean, glue before the kernel; a count of 0 divides
    as 1, so a batch with every target ignored gets a zero gradient, as torch's, not 0 * inf); and it scales a copy
    (autograd's saved gradient stays intact; the copy is the saved gradient's own buffer when the caller dropped the
    forward's ``grad`` output: docs/autograd.md, donated inputs)."""
    import triton
    ce = _ops("cross_entropy")
    grad_output = grad_loss / n_non_ignore.clamp(min=1)
    _input = grad.clone()
    BT, V = _input.shape
    n_rows = BT
    BLOCK_SIZE = min(ce.MAX_FUSED_SIZE, triton.next_power_of_2(V))
    ce.element_mul_kernel[(n_rows,)](_input, _input.stride(-2), grad_output, V, BLOCK_SIZE=BLOCK_SIZE, num_warps=32)
    return _input


def ce_bwd_in_place(grad_loss: torch.Tensor, _input: torch.Tensor, n_non_ignore: torch.Tensor):
    """ce_bwd reading the gradient the forward left in the logits (the forward's input ``_input``, as it left it):
    it scales a copy, which is the logits' own buffer when the caller no longer holds them (donated inputs)."""
    return ce_bwd(grad_loss, _input, n_non_ignore)


def ce_fwd_synced(_input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100):
    """ce_fwd_in_place_synced over a copy of the logits (the functional op)."""
    grad = _input.clone()
    return ce_fwd_in_place_synced(grad, target, ignore_index), grad


def ce_bwd_synced(grad_loss: torch.Tensor, grad: torch.Tensor):
    """Liger's cross_entropy_backward, unchanged, on a copy of the gradient the forward wrote (autograd's saved
    gradient stays intact; the copy is its own buffer when the caller dropped it: docs/autograd.md, donated
    inputs). Its ``torch.equal(grad_output, 1.0)`` is a `when` of its kernel: a loss that is the last layer costs
    no pass over the logits."""
    return _ops("cross_entropy").cross_entropy_backward(grad.clone(), grad_loss)


def ce_bwd_in_place_synced(grad_loss: torch.Tensor, _input: torch.Tensor):
    """ce_bwd_synced reading the gradient the forward left in the logits."""
    return ce_bwd_synced(grad_loss, _input)


def cross_entropy(dtype=torch.float32, op_name="liger::cross_entropy", vocabs=None, in_place=False, host_sync=False):
    """Cross entropy (mean over the rows whose target is not ignore_index) and its backward for logits of `dtype`:
    ``loss, grad, n_non_ignore = op(logits, target, ignore_index=-100)``. ``vocabs``: the classes of
    next_power_of_2(V) to compile (default: 4 to 65536; add 131072 for Llama 3's 128256). ``in_place``: as
    Liger's, the gradient goes over the logits: ``loss, n_non_ignore = op(logits, target)``. ``host_sync``: Liger's
    host syncs kept (module docstring): ``loss, grad = op(logits, target)`` (``loss = op(logits, target)`` in
    place); not for CUDA graphs."""
    if not isinstance(in_place, bool) or not isinstance(host_sync, bool):
        raise TypeError(f"cross_entropy: in_place and host_sync are True or False, got {in_place!r}, {host_sync!r}")
    examples = (torch.empty(4, 1024, dtype=dtype), torch.empty(4, dtype=torch.int64))
    if host_sync and in_place:
        return ko.record_plugin(
            ko.triton(ce_fwd_in_place_synced, specialize=vocabs, outputs=["loss"], host_sync=True),
            op_name=op_name, example_inputs=examples,
            backward=ko.Backward(["_input"], ko.triton(ce_bwd_in_place_synced, host_sync=True)))
    if host_sync:
        return ko.record_plugin(
            ko.triton(ce_fwd_synced, specialize=vocabs, outputs=["loss", "grad"], host_sync=True),
            op_name=op_name, example_inputs=examples,
            backward=ko.Backward(["_input"], ko.triton(ce_bwd_synced, host_sync=True)))
    if in_place:
        return ko.record_plugin(ko.triton(ce_fwd_in_place, specialize=vocabs, outputs=["loss", "n_non_ignore"]),
                                op_name=op_name, example_inputs=examples,
                                backward=ko.Backward(["_input"], ko.triton(ce_bwd_in_place)))
    return ko.record_plugin(ko.triton(ce_fwd, specialize=vocabs, outputs=["loss", "grad", "n_non_ignore"]),
                            op_name=op_name, example_inputs=examples,
                            backward=ko.Backward(["_input"], ko.triton(ce_bwd)))
