#version 450
#extension GL_GOOGLE_include_directive : require
// REDUCE_SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PRODUCT along one axis (kept as 1): p[0] operator (0 sum,
// 1 max, 2 min, 3 product), p[1] elements before the axis, p[2] the axis' length, p[3] elements after it.
#include "common.glsl"

void main() {
    uint i = item();
    uint outer = p[1], len = p[2], inner = p[3];
    if (i >= outer * inner) return;
    uint base = (i / inner) * len * inner + i % inner;
    float acc = a[base];
    for (uint k = 1u; k < len; ++k) {
        float v = a[base + k * inner];
        switch (p[0]) {
        case 0u: acc += v; break;
        case 1u: acc = max(acc, v); break;
        case 2u: acc = min(acc, v); break;
        default: acc *= v; break;
        }
    }
    o[i] = acc;
}
