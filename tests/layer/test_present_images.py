"""What a present shows (#28): layer/queues.py names, in the FRAME message, the VkImage each swapchain
of vkQueuePresentKHR presents — pImageIndices into the images vkGetSwapchainImagesKHR returned — so
hostd's render graph links the last write of each presented image to the present. Hooks driven with
stand-ins (handles are ints, the ffi casts them as they are); vkcube through the real loader is
tests/integration/test_advice.py's."""
from __future__ import annotations

from types import SimpleNamespace as NS

from tessera.layer import encoder
from tessera.layer.queues import Queues, presented_images
from tessera.schemas.frames import FrameDecoder
from tessera.schemas.messages import problems
from tessera.vkapi.vkconst import vk

FFI = NS(NULL=None, cast=lambda ctype, value: value)


def test_each_swapchain_presents_the_image_its_index_names() -> None:
    swapchains = {0xA: (0x100, 0x101, 0x102), 0xB: (0x200,)}
    info = NS(swapchainCount=3, pSwapchains=[0xA, 0xB, 0xC], pImageIndices=[2, 0, 0])
    assert presented_images(FFI, swapchains, info) == (0x102, 0x200, 0)     # 0xC: unknown to the layer
    assert presented_images(FFI, swapchains, NS(swapchainCount=1, pSwapchains=[0xB], pImageIndices=[5])) == (0,)


def test_the_images_are_remembered_when_returned_and_forgotten_with_the_swapchain() -> None:
    q = Queues(NS(session=None), FFI, reporter=None, errors=None)
    dev = NS(swapchains={})
    q.after_vkGetSwapchainImagesKHR(dev, vk.VK_SUCCESS, 1, 0xA, [3], None)              # the count query
    assert dev.swapchains == {}
    q.after_vkGetSwapchainImagesKHR(dev, vk.VK_INCOMPLETE, 1, 0xA, [2], [0x100, 0x101])
    q.after_vkGetSwapchainImagesKHR(dev, vk.VK_ERROR_OUT_OF_HOST_MEMORY, 1, 0xB, [1], [0x200])
    assert dev.swapchains == {0xA: (0x100, 0x101)}
    q.before_vkDestroySwapchainKHR(dev, 1, 0xA, None)
    assert dev.swapchains == {}


def test_the_frame_message_carries_them_and_its_schema_accepts_them() -> None:
    [f] = FrameDecoder().feed(encoder.frame(3, 0xD0, "queue 0.0", "present", 99, (0x102, 0)))
    body = f.payload()
    assert body == {"frame": 3, "time_ns": 99, "device": "0xd0", "queue": "queue 0.0", "source": "present",
                    "images": ["0x102", "0x0"]}
    assert problems(f.type, body) == []
    [g] = FrameDecoder().feed(encoder.frame(4, 0xD0, "queue 0.0", "frame_boundary", 99))
    assert "images" not in g.payload() and problems(g.type, g.payload()) == []
    assert problems(f.type, dict(body, images=[1])) != []


def test_a_frame_boundary_names_its_output_images_and_a_present_adds_them_to_what_it_shows() -> None:
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_queue_reporting import QUEUE, Rig, buffer, work

    rig = Rig(buffer(0x10, work(1)), returned=(1000, 1000))
    rig.submit([0x10], frame_ends=[(7, (0x300, 0x301))])
    rig.submit([0x10], frame_ends=[(8, ())])                                 # names none: no `images`
    rig.reporter.present(rig.dev, QUEUE, lambda: [(9, (0x302,))], lambda: (0x102,))
    rig.reporter.present(rig.dev, QUEUE, lambda: [], lambda: (0x103,))
    frames = [(body["frame"], body["source"], body.get("images")) for kind, _, _, body in rig.messages()
              if kind == "FRAME"]
    assert frames == [(7, "frame_boundary", ["0x300", "0x301"]), (8, "frame_boundary", None),
                      (9, "present", ["0x102", "0x302"]), (10, "present", ["0x103"])]


def test_a_present_whose_images_cannot_be_named_still_ends_its_frame() -> None:
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_queue_reporting import QUEUE, Rig, buffer, work

    rig = Rig(buffer(0x10, work(1)))

    def broken():
        raise IndexError("pImageIndices")
    rig.reporter.present(rig.dev, QUEUE, lambda: [], broken)
    [(kind, _, _, body)] = rig.messages()
    assert kind == "FRAME" and body["frame"] == 0 and "images" not in body
    assert rig.errors.calls == [("report", "vkQueuePresentKHR", "naming the presented images; the frame names none")]
