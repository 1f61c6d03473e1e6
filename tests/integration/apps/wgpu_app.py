"""A real third-party application stack: wgpu-py (wgpu-native, Rust, naga shaders) on Vulkan.

Run: .venv/bin/python tests/integration/apps/wgpu_app.py
Computes b[i] = 3*a[i] + 1 for 1000 elements in a compute pass (work groups of 64), then
renders a red triangle covering the left half of a 64x64 texture in a render pass,
reading both back and checking them. Prints 'wgpu_app: OK ...' and the adapter name.
"""
import numpy as np
import wgpu

N, SIZE = 1000, 64

COMPUTE = """
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&a)) { b[id.x] = a[id.x] * 3u + 1u; }
}
"""
RENDER = """
@vertex
fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    var p = array<vec2<f32>, 3>(vec2(-1.0, -1.0), vec2(0.0, -1.0), vec2(-1.0, 3.0));
    return vec4(p[i], 0.0, 1.0);
}
@fragment
fn fs() -> @location(0) vec4<f32> { return vec4(1.0, 0.0, 0.0, 1.0); }
"""


def compute(device) -> np.ndarray:
    data = np.arange(N, dtype=np.uint32)
    a = device.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.STORAGE)
    b = device.create_buffer(size=data.nbytes, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    module = device.create_shader_module(code=COMPUTE)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    bind = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": a}}, {"binding": 1, "resource": {"buffer": b}}])
    encoder = device.create_command_encoder()
    pass_ = encoder.begin_compute_pass()
    pass_.set_pipeline(pipeline)
    pass_.set_bind_group(0, bind)
    pass_.dispatch_workgroups((N + 63) // 64)
    pass_.end()
    device.queue.submit([encoder.finish()])
    out = np.frombuffer(device.queue.read_buffer(b), dtype=np.uint32)
    if not (out == data * 3 + 1).all():
        raise SystemExit("wgpu_app: FAIL compute results")
    return out


def render(device) -> None:
    texture = device.create_texture(size=(SIZE, SIZE, 1), format=wgpu.TextureFormat.rgba8unorm,
                                    usage=wgpu.TextureUsage.RENDER_ATTACHMENT | wgpu.TextureUsage.COPY_SRC)
    module = device.create_shader_module(code=RENDER)
    pipeline = device.create_render_pipeline(
        layout="auto", vertex={"module": module, "entry_point": "vs"},
        fragment={"module": module, "entry_point": "fs", "targets": [{"format": wgpu.TextureFormat.rgba8unorm}]})
    encoder = device.create_command_encoder()
    pass_ = encoder.begin_render_pass(color_attachments=[{
        "view": texture.create_view(), "load_op": wgpu.LoadOp.clear, "store_op": wgpu.StoreOp.store,
        "clear_value": (0.0, 0.0, 1.0, 1.0)}])
    pass_.set_pipeline(pipeline)
    pass_.draw(3)
    pass_.end()
    device.queue.submit([encoder.finish()])
    pixels = np.frombuffer(device.queue.read_texture({"texture": texture}, {"bytes_per_row": SIZE * 4},
                                                     (SIZE, SIZE, 1)), dtype=np.uint8).reshape(SIZE, SIZE, 4)
    if tuple(pixels[32, 8]) != (255, 0, 0, 255) or tuple(pixels[32, 56]) != (0, 0, 255, 255):
        raise SystemExit(f"wgpu_app: FAIL pixels {tuple(pixels[32, 8])} {tuple(pixels[32, 56])}")


def main() -> None:
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync()
    compute(device)
    render(device)
    print(f"wgpu_app: OK {N} compute results and 2 pixels checked on {adapter.info['device']}")


if __name__ == "__main__":
    main()
