// Shared by the data-graph operator shaders (icd/data_graph/kernels.py): one descriptor set, patched to the
// set index after the application's bound compute layout; bindings 0 parameters, 1-3 inputs, 4 output.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0, std430) readonly buffer Params { uint p[]; };
layout(set = 0, binding = 1, std430) readonly buffer In0 { float a[]; };
layout(set = 0, binding = 2, std430) readonly buffer In1 { float b[]; };
layout(set = 0, binding = 3, std430) readonly buffer In2 { float c[]; };
layout(set = 0, binding = 4, std430) writeonly buffer Out { float o[]; };

uint item() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u; }
float fparam(uint i) { return uintBitsToFloat(p[i]); }
