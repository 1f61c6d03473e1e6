#version 450
// record_cost draw mode: one triangle from gl_VertexIndex, no vertex input.
void main()
{
    vec2 p = vec2(float(gl_VertexIndex & 1), float((gl_VertexIndex >> 1) & 1));
    gl_Position = vec4(p - 0.5, 0.0, 1.0);
}
