#version 450
// Writes one solid color per draw, given as a push constant.
layout(push_constant) uniform Params { vec4 color; } params;
layout(location = 0) out vec4 out_color;

void main()
{
    out_color = params.color;
}
