#version 450
// Discards a checkerboard of 8x8-pixel cells (the cells whose (x/8 + y/8) is even) and writes one
// solid push-constant color elsewhere: a discard pattern whose killed fragments are known exactly.
layout(push_constant) uniform Params { vec4 color; } params;
layout(location = 0) out vec4 out_color;

void main()
{
    ivec2 p = ivec2(gl_FragCoord.xy);
    if (((p.x / 8) + (p.y / 8)) % 2 == 0)
        discard;
    out_color = params.color;
}
