"""TOSA 1.0's integer operators in numpy, written from the specification's pseudocode (not from the driver).

The reference the quantized-graph tests (test_ml_sdk_quantized.py) compare the emulated Mali's results with:
every value is computed in int64, so nothing rounds or wraps that the specification does not round or wrap.

- apply_scale_32 / apply_scale_16 (TOSA 1.0 §"Scaling helpers"): (value * multiplier + round) >> shift with
  round = 1 << (shift - 1); DOUBLE_ROUND adds 1 << 30 (value >= 0) or subtracts it (value < 0) when shift > 31;
  the shift is arithmetic (rounds towards minus infinity after the rounding term).
- RESCALE: value = input - input_zp (both zero-extended when input_unsigned), scaled per channel (the last
  dimension) or by one multiplier, + output_zp, clipped to the output type (unsigned: 0 .. 2^bits - 1).
- CONV2D / DEPTHWISE_CONV2D / MATMUL: int32 accumulators of (input - input_zp) * (weight - weight_zp) over the
  window inside the input (padding contributes nothing), plus the bias.
- CLAMP, ADD (int32), MUL with a rounding shift (int32 operands), TABLE (int8: table[value + 128]).
- CAST: integer to narrower integer keeps the low bits, to wider sign-extends; fp32 to integer rounds half to
  even and saturates; integer to fp32 converts.
- MAX_POOL2D; AVG_POOL2D: the sum of (input - input_zp) over the window inside the input, scaled by
  reciprocal_scale(count) (multiplier ((1 << 30) + 1) << k) / count, shift 30 + k, k = bits of count - 1)
  with apply_scale_32 without double rounding, + output_zp, clipped.
"""
from __future__ import annotations

import numpy as np

SINGLE_ROUND, INEXACT_ROUND, DOUBLE_ROUND = 1, 2, 3


def apply_scale(value, multiplier, shift, double_round: bool):
    """apply_scale_32 (double_round for DOUBLE_ROUND) or apply_scale_16 (double_round False), elementwise."""
    value = np.asarray(value, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    assert np.all(multiplier >= 0) and np.all((shift >= 2) & (shift <= 62)), (multiplier, shift)
    round_ = np.left_shift(np.int64(1), shift - 1)
    if double_round:
        round_ = round_ + np.where(shift > 31, np.where(value >= 0, 1 << 30, -(1 << 30)), 0)
    result = (value * multiplier + round_) >> shift
    assert np.all((result >= -(1 << 31)) & (result < (1 << 31))), "the spec REQUIREs a 32-bit result"
    return result


def type_range(bits: int, unsigned: bool = False) -> tuple[int, int]:
    return (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def rescale(x, multiplier, shift, input_zp: int, output_zp: int, *, out_bits: int, in_bits: int = 8,
            scale32: bool = True, rounding_mode: int = SINGLE_ROUND, per_channel: bool = False,
            input_unsigned: bool = False, output_unsigned: bool = False) -> np.ndarray:
    x = np.asarray(x, np.int64)
    if input_unsigned:
        x = x & ((1 << in_bits) - 1)
        input_zp &= (1 << in_bits) - 1
    value = x - input_zp
    multiplier, shift = np.asarray(multiplier, np.int64), np.asarray(shift, np.int64)
    if not per_channel:
        multiplier, shift = multiplier.reshape(-1)[0], shift.reshape(-1)[0]
    else:
        assert multiplier.shape == (x.shape[-1],) and shift.shape == (x.shape[-1],)
    result = apply_scale(value, multiplier, shift, scale32 and rounding_mode == DOUBLE_ROUND)
    if output_unsigned:
        output_zp &= (1 << out_bits) - 1
    lo, hi = type_range(out_bits, output_unsigned)
    return np.clip(result + output_zp, lo, hi)


def conv2d(x, w, bias, input_zp: int, weight_zp: int, pad, stride, dilation=(1, 1)) -> np.ndarray:
    """NHWC input, OHWI weights, int32 accumulator; pad [top, bottom, left, right]."""
    x = np.asarray(x, np.int64) - input_zp
    w = np.asarray(w, np.int64) - weight_zp
    n, ih, iw, _ = x.shape
    o, kh, kw, _ = w.shape
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    # padding contributes nothing (the spec skips positions outside the input): pad the zero-point-free values
    xp = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)))
    acc = np.zeros((n, oh, ow, o), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            patch = xp[:, y0:y0 + (oh - 1) * stride[0] + 1:stride[0], x0:x0 + (ow - 1) * stride[1] + 1:stride[1], :]
            acc += np.einsum("nyxi,oi->nyxo", patch, w[:, ky, kx, :])
    acc += np.asarray(bias, np.int64).reshape(-1)
    assert np.all(np.abs(acc) < (1 << 31)), "the spec REQUIREs the accumulator to fit int32"
    return acc


def matmul(a, b, a_zp: int, b_zp: int) -> np.ndarray:
    acc = np.einsum("nhc,ncw->nhw", np.asarray(a, np.int64) - a_zp, np.asarray(b, np.int64) - b_zp)
    assert np.all(np.abs(acc) < (1 << 31))
    return acc


def clamp(x, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64), lo, hi)


def add(a, b) -> np.ndarray:
    out = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    assert np.all(np.abs(out) < (1 << 31)), "the spec REQUIREs int32 ADD not to overflow"
    return out


def mul(a, b, shift: int) -> np.ndarray:
    """int32 MUL: the product, or (product + (1 << (shift - 1))) >> shift."""
    product = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    if shift > 0:
        product = (product + (1 << (shift - 1))) >> shift
    assert np.all(np.abs(product) < (1 << 31))
    return product


def reciprocal_scale(count: int) -> tuple[int, int]:
    k = 32 - (32 - int(count - 1).bit_length())          # 32 - count_leading_zeros(count - 1) of a uint32
    return (((1 << 30) + 1) << k) // count, 30 + k


def _windows(shape, kernel, stride, pad):
    n, ih, iw, c = shape
    oh, ow = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1, (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    for y in range(oh):
        for x in range(ow):
            y0, x0 = y * stride[0] - pad[0], x * stride[1] - pad[2]
            yield y, x, slice(max(y0, 0), min(y0 + kernel[0], ih)), slice(max(x0, 0), min(x0 + kernel[1], iw)), oh, ow


def max_pool2d(x, kernel, stride, pad) -> np.ndarray:
    x = np.asarray(x, np.int64)
    out = None
    for y, xx, ys, xs, oh, ow in _windows(x.shape, kernel, stride, pad):
        if out is None:
            out = np.zeros((x.shape[0], oh, ow, x.shape[3]), np.int64)
        out[:, y, xx, :] = x[:, ys, xs, :].max(axis=(1, 2))
    return out


def avg_pool2d(x, kernel, stride, pad, input_zp: int, output_zp: int, bits: int = 8) -> np.ndarray:
    x = np.asarray(x, np.int64)
    lo, hi = type_range(bits)
    out = None
    for y, xx, ys, xs, oh, ow in _windows(x.shape, kernel, stride, pad):
        if out is None:
            out = np.zeros((x.shape[0], oh, ow, x.shape[3]), np.int64)
        window = x[:, ys, xs, :] - input_zp
        count = window.shape[1] * window.shape[2]
        multiplier, shift = reciprocal_scale(count)
        acc = apply_scale(window.sum(axis=(1, 2)), multiplier, shift, False)
        out[:, y, xx, :] = np.clip(acc + output_zp, lo, hi)
    return out


def table(x, values) -> np.ndarray:
    """int8 TABLE: values[x + 128]."""
    return np.asarray(values, np.int64)[np.asarray(x, np.int64) + 128]


def depthwise_conv2d(x, w, bias, input_zp: int, weight_zp: int, pad, stride) -> np.ndarray:
    """NHWC input, KH×KW×C×M weights, int32 accumulator; output channel c * M + m."""
    x = np.asarray(x, np.int64) - input_zp
    w = np.asarray(w, np.int64) - weight_zp
    n, ih, iw, c = x.shape
    kh, kw, _, m = w.shape
    oh, ow = (ih + pad[0] + pad[1] - kh) // stride[0] + 1, (iw + pad[2] + pad[3] - kw) // stride[1] + 1
    xp = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)))
    acc = np.zeros((n, oh, ow, c, m), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky:ky + (oh - 1) * stride[0] + 1:stride[0], kx:kx + (ow - 1) * stride[1] + 1:stride[1], :]
            acc += patch[..., None] * w[ky, kx][None, None, None]
    acc = acc.reshape(n, oh, ow, c * m) + np.asarray(bias, np.int64).reshape(-1)
    assert np.all(np.abs(acc) < (1 << 31))
    return acc


def cast_to_int(x, bits: int) -> np.ndarray:
    """CAST to an integer type of `bits`: fp32 rounds half to even and saturates; integers keep the low bits."""
    x = np.asarray(x)
    lo, hi = type_range(bits)
    if x.dtype.kind == "f":
        return np.clip(np.rint(x.astype(np.float64)), lo, hi).astype(np.int64)
    low = np.asarray(x, np.int64) & ((1 << bits) - 1)
    return np.where(low > hi, low - (1 << bits), low)
