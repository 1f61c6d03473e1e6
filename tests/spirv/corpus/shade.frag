#version 450
// Fragment stage: many descriptor types, discard, switch, loops.
layout(location = 0) in vec2 in_uv;
layout(location = 1) flat in uint in_id;
layout(location = 0) out vec4 color;
layout(location = 1) out uint object_id;

layout(set = 0, binding = 1) uniform sampler2D albedo;
layout(set = 0, binding = 2) uniform texture2D detail;
layout(set = 0, binding = 3) uniform sampler detail_sampler;
layout(set = 1, binding = 0, rgba8) uniform readonly image2D mask;
layout(set = 1, binding = 1) uniform samplerBuffer weights;
layout(set = 1, binding = 2, r32ui) uniform uimageBuffer counters;
layout(set = 2, binding = 0) uniform sampler2D shadows[4];
layout(set = 2, binding = 1, input_attachment_index = 0) uniform subpassInput previous;

void main()
{
    vec4 c = texture(albedo, in_uv) * texture(sampler2D(detail, detail_sampler), in_uv * 4.0);
    if (c.a < 0.1)
        discard;
    float w = 0.0;
    for (int k = 0; k < 4; ++k)
        w += texelFetch(weights, k).x * texture(shadows[k], in_uv).r;
    switch (in_id & 3u) {
    case 0u: c.rgb *= w; break;
    case 1u: c.rgb += imageLoad(mask, ivec2(in_uv * 8.0)).rgb; break;
    default: c = mix(c, subpassLoad(previous), 0.5); break;
    }
    imageAtomicAdd(counters, int(in_id), 1u);
    color = c;
    object_id = in_id;
}
