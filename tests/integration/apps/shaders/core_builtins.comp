#version 450
// Writes the ARM core built-ins of every invocation: count, max ids, and where it ran.
#extension GL_ARM_shader_core_builtins : require
layout(local_size_x = 64) in;
layout(set=0, binding=0) buffer Out { uint v[]; } o;
void main() {
  uint i = gl_GlobalInvocationID.x;
  o.v[i*5+0] = gl_CoreCountARM;
  o.v[i*5+1] = gl_CoreMaxIDARM;
  o.v[i*5+2] = gl_WarpMaxIDARM;
  o.v[i*5+3] = gl_CoreIDARM;
  o.v[i*5+4] = gl_WarpIDARM;
}
