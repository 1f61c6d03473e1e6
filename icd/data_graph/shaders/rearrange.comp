#version 450
#extension GL_GOOGLE_include_directive : require
// Data movement (TRANSPOSE, SLICE, PAD, TILE, REVERSE): each element of a region is read from the source at
// signed element strides, or is the pad value outside the source. p[0] rank, p[1] elements of the region,
// p[2..7] region dimensions, p[8..13] source strides (signed), p[14..19] source extents, p[20..25] padding
// before each dimension, p[26..31] destination strides, p[32] source base (signed), p[33] destination base,
// p[34] the pad value (float bits), p[35] 1: the source coordinate wraps (TILE).
#include "common.glsl"

void main() {
    uint i = item();
    if (i >= p[1]) return;
    uint rem = i, dst = p[33];
    int src = int(p[32]);
    bool inside = true;
    for (int d = int(p[0]) - 1; d >= 0; --d) {
        uint dim = p[2 + d];
        uint k = rem % dim;
        rem /= dim;
        dst += k * p[26 + d];
        int extent = int(p[14 + d]);
        int s = int(k) - int(p[20 + d]);
        if (p[35] != 0u) s = s % extent;
        if (s < 0 || s >= extent) inside = false;
        src += s * int(p[8 + d]);
    }
    o[dst] = inside ? a[uint(src)] : fparam(34);
}
