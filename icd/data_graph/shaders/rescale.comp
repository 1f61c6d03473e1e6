#version 450
#extension GL_GOOGLE_include_directive : require
// TOSA 1.0 RESCALE: value = input - input_zp (zero-extended when input_unsigned), scaled by apply_scale_32 (scale32,
// with DOUBLE_ROUND's double rounding) or apply_scale_16, plus output_zp, clipped to the output type's range.
// p[4] elements, p[5] channels (the input's last dimension), p[6] per_channel, p[7] double rounding,
// p[8] input_unsigned, p[9] the input's bits, p[10], p[11] the output type's range, p[12] input_zp,
// p[13] output_zp, p[14] the output's bits, p[15] output_unsigned, p[16] multipliers (1 or channels),
// p[17] 1: the shifts are a tensor (the third operand); p[32 ..] else the shifts. The multipliers are the second
// operand (a constant tensor of int32 words).
#include "icommon.glsl"

void main() {
    uint i = item();
    if (i >= uint(p[4])) return;
    int value = la(i);
    if (p[8] != 0 && p[9] < 32) value = int(bitfieldExtract(uint(value), 0, p[9]));   // zero-extended
    value -= p[12];
    int ch = p[6] != 0 ? int(i % uint(p[5])) : 0;
    int shift = p[17] != 0 ? lc(uint(ch)) : p[32 + ch];
    int result = apply_scale(value, lb(uint(ch)), shift, p[7] != 0);
    // result + output_zp clipped to the output range, without overflowing int32 on the way
    int v = clamp(result, p[10] - p[13], p[11] - p[13]) + p[13];
    if (p[15] != 0 && p[14] < 32) v = bitfieldExtract(v, 0, p[14]);   // kept sign-extended inside the graph
    store(i, v);
}
