#version 450
// Data-dependent fragment work: a third of the pixels are discarded (a diagonal
// pattern), the left columns take one branch, the rest a loop whose trip count
// depends on the pixel's row. Written to be counted exactly by a CPU reference.
layout(push_constant) uniform Params { vec4 color; } params;
layout(location = 0) out vec4 out_color;

void main()
{
    ivec2 p = ivec2(gl_FragCoord.xy);
    if ((p.x + p.y) % 3 == 0)
        discard;
    vec4 c = params.color;
    if (p.x < 8) {
        c.r = 1.0;
    } else {
        for (int i = 0; i < p.y % 4; i++)
            c.g = c.g * 0.5 + 0.25;
    }
    out_color = c;
}
