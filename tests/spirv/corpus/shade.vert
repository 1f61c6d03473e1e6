#version 450
// Vertex stage: located inputs and outputs, a uniform block, push constants.
layout(location = 0) in vec3 position;
layout(location = 1) in vec2 uv;
layout(location = 2) in uvec4 joints;
layout(location = 0) out vec2 out_uv;
layout(location = 1) flat out uint out_id;

layout(set = 0, binding = 0) uniform Camera { mat4 view_proj; vec4 tint; } camera;
layout(push_constant) uniform Model { mat4 model; } model;

void main()
{
    gl_Position = camera.view_proj * model.model * vec4(position, 1.0);
    out_uv = uv * 0.5 + vec2(0.25);
    out_id = joints.x + uint(gl_VertexIndex);
}
