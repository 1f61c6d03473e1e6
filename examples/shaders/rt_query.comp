#version 460
#extension GL_EXT_ray_query : require
// examples/ray_query.py: the same rays and the same output as rt_scene.rgen/.rmiss/.rchit, with a
// ray query from a compute shader (8x8 work groups over the 64x64 image).
layout(local_size_x = 8, local_size_y = 8) in;
layout(set = 0, binding = 0) uniform accelerationStructureEXT scene;
layout(set = 0, binding = 1, rgba8ui) uniform writeonly uimage2D result;

void main()
{
    vec3 origin = vec3(vec2(gl_GlobalInvocationID.xy) + vec2(0.5), -1.0);
    rayQueryEXT q;
    rayQueryInitializeEXT(q, scene, gl_RayFlagsOpaqueEXT, 0xFF, origin, 0.0, vec3(0.0, 0.0, 1.0), 100.0);
    while (rayQueryProceedEXT(q)) {
    }
    uvec4 value = uvec4(0);
    if (rayQueryGetIntersectionTypeEXT(q, true) == gl_RayQueryCommittedIntersectionTriangleEXT) {
        value = uvec4(rayQueryGetIntersectionInstanceCustomIndexEXT(q, true),
                      rayQueryGetIntersectionPrimitiveIndexEXT(q, true) + 1,
                      uint(rayQueryGetIntersectionTEXT(q, true) + 0.5),
                      100 + rayQueryGetIntersectionGeometryIndexEXT(q, true));
    }
    imageStore(result, ivec2(gl_GlobalInvocationID.xy), value);
}
