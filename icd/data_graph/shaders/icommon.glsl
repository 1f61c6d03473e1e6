// Shared by the integer operator shaders (icd/data_graph/quantized.py): the set and bindings of common.glsl
// (parameters, three inputs, the output), with int8/int16/int32 elements. Inside a graph every integer tensor
// is one int32 word per element (sign-extended); the graph's own input and output tensors keep their format's
// width: p[0..2] the inputs' element bytes, p[3] the output's (1, 2 or 4). The output buffer is read-write: a
// narrow element is written with atomicAnd/atomicOr on its word, so neighbours written by other invocations stay.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0, std430) readonly buffer Params { int p[]; };
layout(set = 0, binding = 1, std430) readonly buffer In0 { uint a[]; };
layout(set = 0, binding = 2, std430) readonly buffer In1 { uint b[]; };
layout(set = 0, binding = 3, std430) readonly buffer In2 { uint c[]; };
layout(set = 0, binding = 4, std430) buffer Out { uint o[]; };

uint item() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u; }

int narrow(uint word, uint i, int width) {          // element i of a packed int8/int16 array, sign-extended
    int bits = width * 8;
    return bitfieldExtract(int(word), int(i % uint(4 / width)) * bits, bits);
}
int la(uint i) { return p[0] == 4 ? int(a[i]) : narrow(a[i / uint(4 / p[0])], i, p[0]); }
int lb(uint i) { return p[1] == 4 ? int(b[i]) : narrow(b[i / uint(4 / p[1])], i, p[1]); }
int lc(uint i) { return p[2] == 4 ? int(c[i]) : narrow(c[i / uint(4 / p[2])], i, p[2]); }

void store(uint i, int v) {
    int width = p[3];
    if (width == 4) { o[i] = uint(v); return; }
    uint per = uint(4 / width), bits = uint(width * 8), shift = (i % per) * bits;
    uint mask = ((1u << bits) - 1u) << shift;
    atomicAnd(o[i / per], ~mask);
    atomicOr(o[i / per], (uint(v) << shift) & mask);
}

// 64-bit signed arithmetic as (hi, lo) pairs, without the Int64 capability.
void add64(inout int hi, inout uint lo, int rhi, uint rlo) {
    uint carry;
    lo = uaddCarry(lo, rlo, carry);
    hi = hi + rhi + int(carry);
}

// TOSA 1.0 apply_scale_32 (double_round: DOUBLE_ROUND) and apply_scale_16 (double_round false):
// (value * multiplier + round) >> shift, round = 1 << (shift - 1), ± 1 << 30 when double rounding a shift > 31;
// the low 32 bits of the result (the spec REQUIREs it to fit). 1 <= shift <= 62.
int apply_scale(int value, int multiplier, int shift, bool double_round) {
    int hi, lo_s;
    imulExtended(value, multiplier, hi, lo_s);
    uint lo = uint(lo_s);
    int rhi = 0;
    uint rlo = 0u;
    if (shift - 1 >= 32) rhi = 1 << (shift - 33); else rlo = 1u << uint(shift - 1);
    if (double_round && shift > 31) {
        if (value >= 0) add64(rhi, rlo, 0, 1u << 30); else add64(rhi, rlo, -1, 0xC0000000u);
    }
    add64(hi, lo, rhi, rlo);
    if (shift >= 32) return hi >> (shift - 32);
    return int((lo >> uint(shift)) | (uint(hi) << uint(32 - shift)));
}
