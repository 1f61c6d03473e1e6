#version 450
#extension GL_GOOGLE_include_directive : require
// Element-wise operators with TOSA broadcasting: p[0] operator, p[1] rank, p[2] output elements,
// p[3..8] output dimensions, p[9..14] / p[15..20] the inputs' element strides (0 on a broadcast dimension),
// p[21], p[22] float attributes (clamp's min and max).
#include "common.glsl"

void main() {
    uint i = item();
    if (i >= p[2]) return;
    uint rank = p[1], rem = i, ia = 0u, ib = 0u;
    for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = p[3 + d];
        uint k = rem % dim;
        rem /= dim;
        ia += k * p[9 + d];
        ib += k * p[15 + d];
    }
    float x = a[ia];
    float r;
    switch (p[0]) {
    case 0u: r = x; break;                                       // copy (RESHAPE)
    case 1u: r = x + b[ib]; break;                               // ADD
    case 2u: r = x - b[ib]; break;                               // SUB
    case 3u: r = x * b[ib]; break;                               // MUL (shift 0)
    case 4u: r = max(x, b[ib]); break;                           // MAXIMUM
    case 5u: r = min(x, b[ib]); break;                           // MINIMUM
    case 6u: r = min(max(x, fparam(21)), fparam(22)); break;     // CLAMP
    case 7u: r = 1.0 / (1.0 + exp(-x)); break;                   // SIGMOID
    case 8u: r = tanh(x); break;                                 // TANH
    case 9u: r = abs(x); break;                                  // ABS
    case 10u: r = exp(x); break;                                 // EXP
    case 11u: r = -x; break;                                     // NEGATE (zero points 0)
    case 12u: r = 1.0 / x; break;                                // RECIPROCAL
    case 13u: r = floor(x); break;                               // FLOOR
    case 14u: r = ceil(x); break;                                // CEIL
    case 15u: r = log(x); break;                                 // LOG
    case 16u: r = inversesqrt(x); break;                         // RSQRT
    case 17u: r = sin(x); break;                                 // SIN
    case 18u: r = cos(x); break;                                 // COS
    case 19u: r = pow(x, b[ib]); break;                          // POW
    default: r = 0.0; break;
    }
    o[i] = r;
}
