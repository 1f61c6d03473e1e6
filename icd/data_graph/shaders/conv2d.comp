#version 450
#extension GL_GOOGLE_include_directive : require
// CONV2D (weights O×KH×KW×I) and DEPTHWISE_CONV2D (weights KH×KW×C×M), NHWC, with bias (1 or O values):
// p[0..3] N, IH, IW, IC; p[4..6] OH, OW, OC; p[7..8] KH, KW; p[9..10] pad top, left; p[11..12] stride y, x;
// p[13..14] dilation y, x; p[15] bias values; p[16] 1 for depthwise; p[17] depthwise multiplier M.
#include "common.glsl"

void main() {
    uint i = item();
    uint N = p[0], IH = p[1], IW = p[2], IC = p[3], OH = p[4], OW = p[5], OC = p[6], KH = p[7], KW = p[8];
    if (i >= N * OH * OW * OC) return;
    uint oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
    bool depthwise = p[16] != 0u;
    uint M = p[17];
    float acc = b[p[15] == 1u ? 0u : oc];
    for (uint ky = 0u; ky < KH; ++ky) {
        int iy = int(oy * p[11] + ky * p[13]) - int(p[9]);
        if (iy < 0 || iy >= int(IH)) continue;
        for (uint kx = 0u; kx < KW; ++kx) {
            int ix = int(ox * p[12] + kx * p[14]) - int(p[10]);
            if (ix < 0 || ix >= int(IW)) continue;
            uint base = ((n * IH + uint(iy)) * IW + uint(ix)) * IC;
            if (depthwise) {
                uint ch = oc / M, m = oc % M;
                acc += a[base + ch] * c[((ky * KW + kx) * IC + ch) * M + m];
            } else {
                uint wbase = ((oc * KH + ky) * KW + kx) * IC;
                for (uint ic = 0u; ic < IC; ++ic)
                    acc += a[base + ic] * c[wbase + ic];
            }
        }
    }
    o[i] = acc;
}
