#version 460
#extension GL_EXT_ray_tracing : require
// Closest hit: (instance custom index, primitive + 1, hit distance rounded, 100 + geometry index).
layout(location = 0) rayPayloadInEXT uvec4 payload;

void main()
{
    payload = uvec4(gl_InstanceCustomIndexEXT, gl_PrimitiveID + 1, uint(gl_HitTEXT + 0.5), 100 + gl_GeometryIndexEXT);
}
