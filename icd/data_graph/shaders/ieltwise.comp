#version 450
#extension GL_GOOGLE_include_directive : require
// Integer element-wise operators with TOSA broadcasting (TOSA 1.0 integer semantics, icd/data_graph/quantized.py):
// p[4] operator (eltwise.comp's numbers), p[5] rank, p[6] output elements, p[7..12] output dimensions,
// p[13..18] / p[19..24] the inputs' element strides (0 on a broadcast dimension), p[25], p[26] CLAMP's bounds or
// the result type's range (NEGATE), p[27] MUL's shift, p[28], p[29] NEGATE's input and output zero points;
// TABLE (int8) reads its 256-entry table (the second operand) at the value + 128; CAST between integer types
// (sign-extending or truncating), from them to fp32 and from fp32 (round half to even, saturating).
#include "icommon.glsl"

void main() {
    uint i = item();
    if (i >= uint(p[6])) return;
    uint rem = i, ia = 0u, ib = 0u;
    for (int d = p[5] - 1; d >= 0; --d) {
        uint dim = uint(p[7 + d]);
        uint k = rem % dim;
        rem /= dim;
        ia += k * uint(p[13 + d]);
        ib += k * uint(p[19 + d]);
    }
    int x = la(ia);
    int r;
    switch (p[4]) {
    case 0: r = x; break;                                          // copy (RESHAPE)
    case 1: r = x + lb(ib); break;                                 // ADD (int32, wraps where TOSA REQUIREs none)
    case 2: r = x - lb(ib); break;                                 // SUB
    case 3: r = p[27] > 0 ? apply_scale(x, lb(ib), p[27], false) : x * lb(ib); break;   // MUL, rounded shift
    case 4: r = max(x, lb(ib)); break;                             // MAXIMUM
    case 5: r = min(x, lb(ib)); break;                             // MINIMUM
    case 6: r = clamp(x, p[25], p[26]); break;                     // CLAMP
    case 9: r = abs(x); break;                                     // ABS
    case 11: r = clamp(-(x - p[28]) + p[29], p[25], p[26]); break; // NEGATE with zero points
    case 13: r = lb(uint(x + 128)); break;                         // TABLE, int8: table[value + 128]
    case 14: {                                                     // CAST (p[27]: 0 int -> int, 1 int -> fp32,
        if (p[27] == 0) { r = bitfieldExtract(x, 0, p[28]); break; }   //  2 fp32 -> int; p[28] result bits)
        if (p[27] == 1) { r = floatBitsToInt(float(x)); break; }
        float f = intBitsToFloat(x);                               // round half to even, saturate; NaN -> 0
        r = isnan(f) ? 0 : f >= float(p[26]) ? p[26] : f <= float(p[25]) ? p[25] : int(roundEven(f));
        break;
    }
    default: r = 0; break;
    }
    store(i, r);
}
