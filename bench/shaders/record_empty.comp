#version 450
// record_cost dispatch mode: an empty compute shader.
layout(local_size_x = 64) in;
void main() {}
