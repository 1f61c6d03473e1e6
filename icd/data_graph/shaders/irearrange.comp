#version 450
#extension GL_GOOGLE_include_directive : require
// Integer data movement (TRANSPOSE, SLICE, PAD, TILE, REVERSE, CONCAT's parts), as rearrange.comp on integer
// elements: p[4..39] are rearrange.comp's p[0..35], except p[38]: the pad value as an integer.
#include "icommon.glsl"

void main() {
    uint i = item();
    if (i >= uint(p[5])) return;
    uint rem = i, dst = uint(p[37]);
    int src = p[36];
    bool inside = true;
    for (int d = p[4] - 1; d >= 0; --d) {
        uint dim = uint(p[6 + d]);
        uint k = rem % dim;
        rem /= dim;
        dst += k * uint(p[30 + d]);
        int extent = p[18 + d];
        int s = int(k) - p[24 + d];
        if (p[39] != 0) s = s % extent;
        if (s < 0 || s >= extent) inside = false;
        src += s * p[12 + d];
    }
    store(dst, inside ? la(uint(src)) : p[38]);
}
