#version 450
#extension GL_GOOGLE_include_directive : require
// Integer MAX_POOL2D and AVG_POOL2D (TOSA 1.0), NHWC: p[4..16] as pool2d.comp's p[0..12]; p[17] input_zp,
// p[18] output_zp, p[19], p[20] the output type's range; p[32 + 2 (n - 1)], p[33 + 2 (n - 1)]: the
// reciprocal_scale (multiplier, shift) of a window of n elements inside the input (n = 1 .. KH * KW).
// Average: sum of (input - input_zp), apply_scale_32(sum, multiplier, shift, single rounding) + output_zp,
// clipped.
#include "icommon.glsl"

void main() {
    uint i = item();
    uint N = uint(p[4]), IH = uint(p[5]), IW = uint(p[6]), C = uint(p[7]), OH = uint(p[8]), OW = uint(p[9]),
         KH = uint(p[10]), KW = uint(p[11]);
    if (i >= N * OH * OW * C) return;
    uint ch = i % C, ox = (i / C) % OW, oy = (i / (C * OW)) % OH, n = i / (C * OW * OH);
    bool maximum = p[16] != 0;
    int acc = maximum ? int(0x80000000u) : 0;
    int count = 0;
    for (uint ky = 0u; ky < KH; ++ky) {
        int iy = int(oy * uint(p[12]) + ky) - p[14];
        if (iy < 0 || iy >= int(IH)) continue;
        for (uint kx = 0u; kx < KW; ++kx) {
            int ix = int(ox * uint(p[13]) + kx) - p[15];
            if (ix < 0 || ix >= int(IW)) continue;
            int v = la(((n * IH + uint(iy)) * IW + uint(ix)) * C + ch);
            acc = maximum ? max(acc, v) : acc + (v - p[17]);
            count += 1;
        }
    }
    if (!maximum) {
        int at = 32 + 2 * (max(count, 1) - 1);
        acc = clamp(apply_scale(acc, p[at], p[at + 1], false), p[19] - p[18], p[20] - p[18]) + p[18];
    }
    store(i, acc);
}
