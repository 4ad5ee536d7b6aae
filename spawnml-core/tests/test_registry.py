"""The backend registry: every backend listed, preference order, explicit choice."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spawnml import hookimpl, plugins, registry
from spawnml.backend import Backend, BackendInfo, DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.pending import PendingRuntime
from spawnml.plugins import PluginManager


def fake_backend(name: str, kind: DeviceKind, reason: str = "") -> type[Backend]:
    """A registrable backend class whose probe reports ``kind``; construction is cheap."""

    def probe(cls: type[Backend]) -> BackendInfo:
        ok = kind is not DeviceKind.NONE
        return BackendInfo(name, ok, reason, f"{name} device" if ok else "", kind)

    methods = {"probe": classmethod(probe), "__init__": lambda self: None}
    abstract = [m for m in Backend.__abstractmethods__ if m != "probe"]
    methods.update({m: (lambda self, *a: None) for m in abstract})
    return type(f"Fake{name.title()}", (Backend,), {"name": name, **methods})


class RaisingProbe(Backend):
    name = "flaky"

    @classmethod
    def probe(cls) -> BackendInfo:
        raise RuntimeError("driver crashed")


class NotYet(PendingRuntime):
    name = "later"
    runtime_issue = "issue #99"

    @classmethod
    def probe(cls) -> BackendInfo:
        return BackendInfo("later", True, device="a device", device_kind=DeviceKind.GPU)


def plugin(*classes: type) -> object:
    @hookimpl
    def spawnml_register_backends(register):
        for cls in classes:
            register(cls)

    return SimpleNamespace(spawnml_register_backends=spawnml_register_backends)


@pytest.fixture
def install(fresh_plugins: pytest.MonkeyPatch):
    """Make a PluginManager holding the given plugin objects the process-wide one."""

    def use(**named: object) -> PluginManager:
        pm = PluginManager()
        for name, obj in named.items():
            pm.register(obj, name)
        fresh_plugins.setattr(plugins, "_manager", pm)
        registry.reset()
        return pm

    return use


def test_available_backends_come_in_preference_order(install) -> None:
    install(
        builtin=plugin(
            fake_backend("wasm", DeviceKind.EMULATED),
            fake_backend("cpu", DeviceKind.CPU),
            fake_backend("opencl", DeviceKind.EMULATED),
            fake_backend("webgl", DeviceKind.GPU),
            fake_backend("cuda", DeviceKind.NONE, "libcuda.so.1 not found: no NVIDIA driver"),
            fake_backend("webgpu", DeviceKind.GPU),
        ),
        third_party=plugin(fake_backend("example", DeviceKind.EMULATED)),
    )
    # real GPUs (cuda, webgpu, opencl, webgl order), then cpu, then emulated devices
    assert registry.get_available_backends() == [
        "webgpu",
        "webgl",
        "cpu",
        "opencl",
        "wasm",
        "example",
    ]
    infos = registry.list_backends()
    assert [i.name for i in infos][-1] == "cuda"
    cuda = infos[-1]
    assert not cuda.available and cuda.reason.startswith("libcuda.so.1 not found")
    assert {i.plugin for i in infos} == {"builtin", "third_party"}
    assert next(i for i in infos if i.name == "example").plugin == "third_party"


def test_a_raising_probe_lists_the_backend_as_unavailable(install) -> None:
    install(p=plugin(RaisingProbe, fake_backend("cpu", DeviceKind.CPU)))
    flaky = next(i for i in registry.list_backends() if i.name == "flaky")
    assert not flaky.available
    assert "driver crashed" in flaky.reason
    assert registry.get_available_backends() == ["cpu"]


def test_bad_registrations_are_recorded_not_fatal(install) -> None:
    pm = install(
        good=plugin(fake_backend("cpu", DeviceKind.CPU)),
        not_a_backend=plugin(dict),
        clash=plugin(fake_backend("cpu", DeviceKind.CPU)),
    )
    assert [i.name for i in registry.list_backends()] == ["cpu"]
    errors = {r.name: r.error for r in pm.records}
    assert "not a Backend" in errors["not_a_backend"]
    assert "registered twice" in errors["clash"]
    assert errors["good"] == ""


def test_get_backend_explains_why_not(install) -> None:
    install(
        p=plugin(
            fake_backend("cpu", DeviceKind.CPU),
            fake_backend("cuda", DeviceKind.NONE, "libcuda.so.1 not found: no NVIDIA driver"),
            NotYet,
        )
    )
    cpu = registry.get_backend("cpu")
    assert registry.get_backend("cpu") is cpu  # one instance per process
    with pytest.raises(BackendUnavailableError, match=r"no backend named 'nope'.*cpu, cuda"):
        registry.get_backend("nope")
    with pytest.raises(BackendUnavailableError, match=r"'cuda' is unavailable: libcuda\.so\.1"):
        registry.get_backend("cuda")
    with pytest.raises(BackendUnavailableError, match=r"later runtime is not implemented.*#99"):
        registry.get_backend("later")


def test_a_string_where_a_backend_list_is_expected_is_names_not_letters() -> None:
    from spawnml.errors import InvalidInputError
    from spawnml.registry import backend_names

    assert backend_names("cpu") == ["cpu"]
    assert backend_names("wasm, cpu") == ["wasm", "cpu"]
    assert backend_names(("cpu",)) == ["cpu"]
    assert backend_names(None) is None
    with pytest.raises(InvalidInputError, match="no backend named"):
        backend_names(" , ")


def test_session_takes_one_backend_name_as_a_string() -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from spawnml import InferenceSession

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert InferenceSession(model.SerializeToString(), backends="cpu").get_providers() == ["cpu"]
    assert onnx is not None
