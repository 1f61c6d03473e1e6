#version 450
#extension GL_GOOGLE_include_directive : require
// Integer MATMUL (TOSA 1.0): A [N, H, C] · B [N, C, W] -> int32 [N, H, W], sum of (A - A_zp) * (B - B_zp).
// p[4..7] N, H, C, W; p[8] A_zp, p[9] B_zp.
#include "icommon.glsl"

void main() {
    uint i = item();
    uint N = uint(p[4]), H = uint(p[5]), C = uint(p[6]), W = uint(p[7]);
    if (i >= N * H * W) return;
    uint w = i % W, h = (i / W) % H, n = i / (W * H);
    int acc = 0;
    for (uint k = 0u; k < C; ++k)
        acc += (la((n * H + h) * C + k) - p[8]) * (lb((n * C + k) * W + w) - p[9]);
    store(i, acc);
}
