#version 450
#extension GL_GOOGLE_include_directive : require
// Integer CONV2D (weights O×KH×KW×I) and DEPTHWISE_CONV2D (KH×KW×C×M), NHWC, int32 accumulator (TOSA 1.0):
// acc = bias[oc] + sum over the window inside the input of (input - input_zp) * (weight - weight_zp).
// p[4..21] as conv2d.comp's p[0..17]; p[22] input_zp, p[23] weight_zp. Operands: input, bias, weights.
#include "icommon.glsl"

void main() {
    uint i = item();
    uint N = uint(p[4]), IH = uint(p[5]), IW = uint(p[6]), IC = uint(p[7]), OH = uint(p[8]), OW = uint(p[9]),
         OC = uint(p[10]), KH = uint(p[11]), KW = uint(p[12]);
    if (i >= N * OH * OW * OC) return;
    uint oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
    bool depthwise = p[20] != 0;
    uint M = uint(p[21]);
    int izp = p[22], wzp = p[23];
    int acc = lb(p[19] == 1 ? 0u : oc);
    for (uint ky = 0u; ky < KH; ++ky) {
        int iy = int(oy * uint(p[15]) + ky * uint(p[17])) - p[13];
        if (iy < 0 || iy >= int(IH)) continue;
        for (uint kx = 0u; kx < KW; ++kx) {
            int ix = int(ox * uint(p[16]) + kx * uint(p[18])) - p[14];
            if (ix < 0 || ix >= int(IW)) continue;
            uint base = ((n * IH + uint(iy)) * IW + uint(ix)) * IC;
            if (depthwise) {
                uint ch = oc / M, m = oc % M;
                acc += (la(base + ch) - izp) * (lc(((ky * KW + kx) * IC + ch) * M + m) - wzp);
            } else {
                uint wbase = ((oc * KH + ky) * KW + kx) * IC;
                for (uint ic = 0u; ic < IC; ++ic)
                    acc += (la(base + ic) - izp) * (lc(wbase + ic) - wzp);
            }
        }
    }
    store(i, acc);
}
