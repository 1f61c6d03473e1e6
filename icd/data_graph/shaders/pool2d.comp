#version 450
#extension GL_GOOGLE_include_directive : require
// AVG_POOL2D (the divisor counts the window's elements inside the input, as TOSA defines it) and MAX_POOL2D,
// NHWC: p[0..3] N, IH, IW, C; p[4..5] OH, OW; p[6..7] KH, KW; p[8..9] stride y, x; p[10..11] pad top, left;
// p[12] 0 average, 1 maximum.
#include "common.glsl"

void main() {
    uint i = item();
    uint N = p[0], IH = p[1], IW = p[2], C = p[3], OH = p[4], OW = p[5], KH = p[6], KW = p[7];
    if (i >= N * OH * OW * C) return;
    uint ch = i % C, ox = (i / C) % OW, oy = (i / (C * OW)) % OH, n = i / (C * OW * OH);
    bool maximum = p[12] != 0u;
    float acc = maximum ? uintBitsToFloat(0xff800000u) : 0.0;
    uint count = 0u;
    for (uint ky = 0u; ky < KH; ++ky) {
        int iy = int(oy * p[8] + ky) - int(p[10]);
        if (iy < 0 || iy >= int(IH)) continue;
        for (uint kx = 0u; kx < KW; ++kx) {
            int ix = int(ox * p[9] + kx) - int(p[11]);
            if (ix < 0 || ix >= int(IW)) continue;
            float v = a[((n * IH + uint(iy)) * IW + uint(ix)) * C + ch];
            acc = maximum ? max(acc, v) : acc + v;
            count += 1u;
        }
    }
    o[i] = maximum ? acc : acc / float(max(count, 1u));
}
