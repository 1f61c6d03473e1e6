"""Two instances, each with its own device, used interleaved in one process.

Run: .venv/bin/python tests/integration/apps/two_devices.py  (under `tessera run` or not)
Each device runs collatz.comp on different data; commands are recorded on
both before either is submitted, submitted in the opposite order, and the
first-created context is destroyed while the second keeps working.
Checks every output against a Python reference; prints 'two_devices: OK'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402

N = 256


class Job:
    def __init__(self, ctx: vkapp.Context, seed: int) -> None:
        self.ctx = ctx
        self.inputs = np.random.default_rng(seed).integers(1, 50_000, size=N, dtype=np.uint32)
        storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
        self.inbuf = ctx.buffer(N * 4, storage, self.inputs)
        self.outbuf = ctx.buffer(N * 4, storage, np.zeros(N, dtype=np.uint32))
        stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
        set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                     (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
        self.layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
        self.pipeline = ctx.compute_pipeline("collatz.comp", self.layout, spec={0: 64})
        pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
        self.dset = ctx.allocate_set(pool, set_layout)
        ctx.write_storage_buffers(self.dset, [(0, self.inbuf, 0, vkapp.WHOLE_SIZE),
                                              (1, self.outbuf, 0, vkapp.WHOLE_SIZE)])
        self.count = vk.ffi.new("uint32_t[1]", [N])

    def record(self):
        cmd = self.ctx.command_buffer()
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, [self.dset], 0, None)
        vk.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, self.count)
        vk.vkCmdDispatch(cmd, N // 64, 1, 1)
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
        return cmd

    def check(self, what: str) -> None:
        want = np.array([collatz_reference(int(v)) for v in self.inputs], dtype=np.uint32)
        vkapp.check_equal(what, self.outbuf.array(np.uint32).copy(), want)


def main() -> None:
    settings = vkapp.Settings.from_env()
    a = Job(vkapp.Context(settings, "two_devices_a"), seed=1)
    b = Job(vkapp.Context(settings, "two_devices_b"), seed=2)
    cmd_a, cmd_b = a.record(), b.record()
    b.ctx.submit([cmd_b])
    a.ctx.submit([cmd_a])
    a.check("device A")
    b.check("device B")
    a.ctx.close()                     # first instance gone; the second keeps working
    b.outbuf.array(np.uint32)[:] = 0
    b.ctx.submit([b.record()])
    b.check("device B after A was destroyed")
    b.ctx.close()
    print(f"two_devices: OK 2 instances x 1 device, {N} results each, on {b.ctx.device_name}")


if __name__ == "__main__":
    main()
