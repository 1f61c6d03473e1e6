#version 450
// record_cost dispatch mode: an empty compute shader (same as dispatch_cost.c's).
layout(local_size_x = 64) in;
void main() {}
