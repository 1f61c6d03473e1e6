#version 450
// One triangle covering the whole viewport, from gl_VertexIndex (no vertex buffer).
void main()
{
    vec2 uv = vec2(float((gl_VertexIndex << 1) & 2), float(gl_VertexIndex & 2));
    gl_Position = vec4(uv * 2.0 - 1.0, 0.0, 1.0);
}
