#version 450
// tests/integration/apps/shadow_reads.py: the "lit" pass samples the shadow map (its depth) at its pixel.
layout(set = 0, binding = 0) uniform sampler2D shadow;
layout(location = 0) out vec4 color;

void main() {
    color = vec4(texture(shadow, gl_FragCoord.xy / 64.0).r, 0.0, 0.0, 1.0);
}
