#version 450
// record_cost draw mode: a constant color.
layout(location = 0) out vec4 out_color;

void main()
{
    out_color = vec4(1.0, 0.0, 0.0, 1.0);
}
