#version 450
#extension GL_EXT_multiview : require
// Multiview: view 0 draws the quad as given, view 1 squeezes it into the left half (x -> x/2 in pixels).
layout(location = 0) in vec2 in_pos;

void main()
{
    vec2 p = in_pos;
    if (gl_ViewIndex == 1)
        p.x = (p.x + 1.0) * 0.5 - 1.0;
    gl_Position = vec4(p, 0.0, 1.0);
}
