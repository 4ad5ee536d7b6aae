"""Image architectures with deterministic random weights, written with ``onnx.helper``.

Layouts follow the torchvision / PyTorch-examples definitions (SqueezeNet 1.1, ResNet-50
v1.5, MobileNetV2, ESPCN, fast-neural-style TransformerNet) so the graphs exercise the same
operators, shapes and attribute variants as exported pretrained models.
"""

from __future__ import annotations

import numpy as np
import onnx

from .builder import FLOAT, GraphBuilder


def _classifier_tail(b: GraphBuilder, x: str, channels: int, classes: int) -> str:
    pooled = b.op("GlobalAveragePool", [x])
    flat = b.op("Flatten", [pooled], axis=1)
    return b.gemm(flat, channels, classes)


def squeezenet11(seed: int = 0, classes: int = 1000) -> onnx.ModelProto:
    """SqueezeNet 1.1: fire modules (squeeze 1×1, expand 1×1 ‖ 3×3, Concat), ceil-mode pools."""
    b = GraphBuilder("squeezenet1_1", seed)

    def pool(x: str) -> str:
        return b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x: str, c_in: int, squeeze: int, expand: int) -> str:
        s = b.relu(b.conv(x, c_in, squeeze, 1))
        e1 = b.relu(b.conv(s, squeeze, expand, 1))
        e3 = b.relu(b.conv(s, squeeze, expand, 3))
        return b.op("Concat", [e1, e3], axis=1)

    x = pool(b.relu(b.conv("input", 3, 64, 3, stride=2, pad=0)))
    x = fire(x, 64, 16, 64)
    x = pool(fire(x, 128, 16, 64))
    x = fire(x, 128, 32, 128)
    x = pool(fire(x, 256, 32, 128))
    for c_in, squeeze, expand in [(256, 48, 192), (384, 48, 192), (384, 64, 256), (512, 64, 256)]:
        x = fire(x, c_in, squeeze, expand)
    # The classifier is a 1×1 conv over 512 channels then a global mean over 13×13: the
    # pattern BACKEND-NOTES reports a software-driver miscompile on.
    x = b.relu(b.conv(x, 512, classes, 1))
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.model([("input", FLOAT, [1, 3, 224, 224])], [(x, "logits", FLOAT, [1, classes])])


def resnet50(seed: int = 0, classes: int = 1000) -> onnx.ModelProto:
    """ResNet-50 v1.5 (stride on the 3×3 conv) with unfused BatchNormalization."""
    b = GraphBuilder("resnet50", seed)

    def conv_bn(x: str, c_in: int, c_out: int, k: int, stride: int = 1, gamma=(0.8, 1.2)) -> str:
        return b.batchnorm(b.conv(x, c_in, c_out, k, stride=stride, bias=False), c_out, gamma=gamma)

    def bottleneck(x: str, c_in: int, width: int, stride: int) -> str:
        c_out = width * 4
        y = b.relu(conv_bn(x, c_in, width, 1))
        y = b.relu(conv_bn(y, width, width, 3, stride))
        # A small last-BN scale (as zero-init-residual training leaves it) keeps the
        # residual sum from growing block after block.
        y = conv_bn(y, width, c_out, 1, gamma=(0.2, 0.4))
        skip = x if stride == 1 and c_in == c_out else conv_bn(x, c_in, c_out, 1, stride)
        return b.relu(b.op("Add", [y, skip]))

    x = b.relu(conv_bn("input", 3, 64, 7, 2))
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            x = bottleneck(x, c_in, width, stride if i == 0 else 1)
            c_in = width * 4
    logits = _classifier_tail(b, x, c_in, classes)
    return b.model([("input", FLOAT, [1, 3, 224, 224])], [(logits, "logits", FLOAT, [1, classes])])


def mobilenetv2(seed: int = 0, classes: int = 1000) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): inverted residuals with depthwise convs and ReLU6 (Clip)."""
    b = GraphBuilder("mobilenetv2", seed)

    def conv_bn(
        x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, gamma=(0.8, 1.2)
    ) -> str:
        y = b.conv(x, c_in, c_out, k, stride=stride, group=group, bias=False)
        return b.batchnorm(y, c_out, gamma=gamma)

    x = b.relu6(conv_bn("input", 3, 32, 3, 2))
    c_in = 32
    for t, c, n, s in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            y = x if t == 1 else b.relu6(conv_bn(x, c_in, hidden, 1))
            y = b.relu6(conv_bn(y, hidden, hidden, 3, stride, group=hidden))
            y = conv_bn(y, hidden, c, 1, gamma=(0.3, 0.6))
            x = b.op("Add", [x, y]) if stride == 1 and c_in == c else y
            c_in = c
    x = b.relu6(conv_bn(x, c_in, 1280, 1))
    logits = _classifier_tail(b, x, 1280, classes)
    return b.model([("input", FLOAT, [1, 3, 224, 224])], [(logits, "logits", FLOAT, [1, classes])])


def espcn_x3(seed: int = 0) -> onnx.ModelProto:
    """ESPCN ×3 on the luma channel: 1×1×224×224 → 1×1×672×672 (sub-pixel DepthToSpace)."""
    b = GraphBuilder("espcn_x3", seed)
    x = b.op("Tanh", [b.conv("input", 1, 64, 5, gain=1.0)])
    x = b.op("Tanh", [b.conv(x, 64, 32, 3, gain=1.0)])
    x = b.conv(x, 32, 9, 3, gain=1.0)
    # PyTorch's PixelShuffle is DepthToSpace in CRD mode.
    x = b.op("DepthToSpace", [x], blocksize=3, mode="CRD")
    return b.model([("input", FLOAT, [1, 1, 224, 224])], [(x, "output", FLOAT, [1, 1, 672, 672])])


def transformer_net(seed: int = 0, size: int = 224) -> onnx.ModelProto:
    """fast-neural-style TransformerNet: reflection-padded convs, InstanceNorm, residual
    blocks and nearest-neighbour upsampling (Resize) followed by convs."""
    b = GraphBuilder("transformer_net", seed)

    def conv(x: str, c_in: int, c_out: int, k: int, stride: int = 1, gain: float = 2.0) -> str:
        p = k // 2
        pads = b.ints("pads", [0, 0, p, p, 0, 0, p, p])
        padded = b.op("Pad", [x, pads], mode="reflect")
        return b.conv(padded, c_in, c_out, k, stride=stride, pad=0, gain=gain)

    def conv_in_relu(x: str, c_in: int, c_out: int, k: int, stride: int = 1) -> str:
        return b.relu(b.instancenorm(conv(x, c_in, c_out, k, stride), c_out))

    def upsample(x: str) -> str:
        scales = b.const("scales", np.array([1, 1, 2, 2], np.float32))
        return b.op("Resize", [x, "", scales], mode="nearest")

    x = conv_in_relu("input", 3, 32, 9)
    x = conv_in_relu(x, 32, 64, 3, 2)
    x = conv_in_relu(x, 64, 128, 3, 2)
    for _ in range(5):
        y = conv_in_relu(x, 128, 128, 3)
        y = b.instancenorm(conv(y, 128, 128, 3), 128)
        x = b.op("Add", [x, y])
    x = conv_in_relu(upsample(x), 128, 64, 3)
    x = conv_in_relu(upsample(x), 64, 32, 3)
    x = conv(x, 32, 3, 9, gain=1.0)
    shape = [1, 3, size, size]
    return b.model([("input", FLOAT, shape)], [(x, "output", FLOAT, shape)])
