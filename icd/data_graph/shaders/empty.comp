#version 450
// What the backend gets instead of a data-graph module (icd/data_graph/pipelines.py): the graph's SPIR-V
// (GraphARM, TensorsARM) is the driver's alone, so the backend's vkCreateShaderModule sees valid SPIR-V it knows.
layout(local_size_x = 1) in;
void main() {}
