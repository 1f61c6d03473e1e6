#version 450
// Second subpass: reads the first subpass's color as an input attachment and
// writes its inverse (1 - rgb, alpha 1).
layout(input_attachment_index = 0, set = 0, binding = 0) uniform subpassInput src;
layout(location = 0) out vec4 out_color;

void main()
{
    out_color = vec4(vec3(1.0) - subpassLoad(src).rgb, 1.0);
}
