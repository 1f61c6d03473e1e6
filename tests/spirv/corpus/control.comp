#version 450
// Loops, branches, switch, function calls and specialization constants
// (local_size_x_id = 3 default 8, local_size_y = 2, constant_id 5 used in arithmetic).
layout(local_size_x_id = 3, local_size_y = 2, local_size_z = 1) in;
layout(constant_id = 3) const uint BLOCK = 8u;
layout(constant_id = 5) const int SCALE = 3;
layout(constant_id = 7) const bool FAST = false;

layout(std140, set = 1, binding = 2) uniform Config { uvec4 limits; float gain; } config;
layout(std430, set = 0, binding = 0) buffer Data { uint items[]; } data;
layout(push_constant) uniform Push { uint offset; uint mode; } pc;

shared uint scratch[16];

uint mix_bits(uint a, uint b)
{
    return (a ^ (b << 3u)) + uint(SCALE * 2);
}

uint classify(uint v)
{
    switch (v % 4u) {
    case 0u: return 10u;
    case 1u: v += 3u; break;
    case 2u:
    case 3u: v = mix_bits(v, 7u); break;
    default: v = 0u;
    }
    return v;
}

void main()
{
    uint i = gl_GlobalInvocationID.x + pc.offset;
    uint acc = 0u;
    for (uint k = 0u; k < config.limits.x; ++k) {
        if (k == 5u)
            continue;
        if (acc > 1000u)
            break;
        acc += classify(k + i);
    }
    uint n = i;
    do {
        n = n / 2u;
        acc += 1u;
    } while (n > 0u);
    if (FAST)
        acc *= 2u;
    scratch[gl_LocalInvocationIndex % 16u] = acc;
    barrier();
    data.items[i] = acc + scratch[0] * BLOCK + uint(config.gain);
}
