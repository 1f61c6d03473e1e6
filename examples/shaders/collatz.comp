#version 450
// Data-dependent control flow: each invocation walks the Collatz sequence of
// its input value, so loop trip counts and branch directions depend on buffer
// contents. Work-group size is a specialization constant (id 0, default 64).
layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params { uint count; } params;
layout(set = 0, binding = 0) readonly buffer Inputs { uint values[]; } inputs;
layout(set = 0, binding = 1) writeonly buffer Outputs { uint steps[]; } outputs;

uint collatz_steps(uint v)
{
    uint steps = 0u;
    while (v > 1u && steps < 1000u) {
        if ((v & 1u) == 0u)
            v = v >> 1u;
        else
            v = 3u * v + 1u;
        steps++;
    }
    return steps;
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= params.count)
        return;
    uint s = collatz_steps(inputs.values[i]);
    // A second data-dependent branch so results take different paths.
    if (s > 20u)
        s = s + 1000u;
    outputs.steps[i] = s;
}
