#version 460
#extension GL_EXT_ray_tracing : require
// Miss: background (0, 0, 0, 0).
layout(location = 0) rayPayloadInEXT uvec4 payload;

void main()
{
    payload = uvec4(0);
}
