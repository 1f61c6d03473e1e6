#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL: A [N, H, C] · B [N, C, W] -> [N, H, W]; p[0..3] N, H, C, W.
#include "common.glsl"

void main() {
    uint i = item();
    uint N = p[0], H = p[1], C = p[2], W = p[3];
    if (i >= N * H * W) return;
    uint w = i % W, h = (i / W) % H, n = i / (W * H);
    float acc = 0.0;
    for (uint k = 0u; k < C; ++k)
        acc += a[(n * H + h) * C + k] * b[(n * C + k) * W + w];
    o[i] = acc;
}
