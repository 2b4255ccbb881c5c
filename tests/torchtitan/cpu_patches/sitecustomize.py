"""torchtitan 0.3.0 on CPU with torch 2.13 (docs/training-at-scale.md lists these): the test
harness puts this folder on PYTHONPATH of the torchrun processes; layerzoo's code has none of it."""

import sys
import types


def _no_triton_kernels() -> None:
    """1. torchtitan imports its triton expert-parallel kernels unconditionally; CPU wheels have no triton."""
    stub = types.ModuleType("torchtitan.distributed.minimal_async_ep.kernels")

    def missing(name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{name} needs triton")
        return unavailable

    stub.__getattr__ = missing
    sys.modules[stub.__name__] = stub


_no_triton_kernels()


def _cpu_device() -> None:
    """2. torchtitan takes "cuda" as the device when no accelerator is found; on CPU it is "cpu"."""
    import torch._utils

    available = torch._utils._get_available_device_type
    torch._utils._get_available_device_type = lambda: available() or "cpu"


_cpu_device()


def _cpu_memory_monitor() -> None:
    """3. torchtitan's memory monitor asks the device module for a name, capacity and peak stats;
    torch.cpu has none of them: constant stand-ins (nothing is measured on CPU)."""
    import torch

    stand_ins = {
        "get_device_name": lambda device=None: "cpu",
        "get_device_properties": lambda device=None: types.SimpleNamespace(total_memory=1 << 40),
        "reset_peak_memory_stats": lambda device=None: None,
        "empty_cache": lambda: None,
        "memory_stats": lambda device=None: {},
    }
    for name, function in stand_ins.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, function)


_cpu_memory_monitor()


def _after_import(name: str, patch) -> None:
    """Run patch(module) once module `name` has been imported (torchtitan is imported late, if at all)."""
    import importlib.abc
    import importlib.util

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            execute = spec.loader.exec_module

            def exec_module(module):
                execute(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _gloo_timeouts(utils) -> None:
    """4. set_pg_timeouts calls barrier(device_ids=...), which gloo refuses: a plain barrier, then
    torchtitan's own timeouts (torch.distributed.set_timeout, which layerzoo fills in on torch 2.13)."""
    import torch.distributed as dist

    def set_pg_timeouts(timeout, parallel_dims):
        dist.barrier()
        groups = [mesh.get_group() for mesh in parallel_dims.get_all_one_dimensional_meshes().values()] + [None]
        for group in groups:
            dist.set_timeout(timeout, group)

    utils.set_pg_timeouts = set_pg_timeouts


_after_import("torchtitan.distributed.utils", _gloo_timeouts)


def _gloo_sum_reduction(fsdp) -> None:
    """5. With FSDP's gradient division off, its reduce-scatter uses PREMUL_SUM, which gloo lacks: force SUM."""
    disable = fsdp.disable_fsdp_gradient_division

    def disable_and_sum(model):
        disable(model)
        for module in model.modules():
            if isinstance(module, fsdp.FSDPModule):
                module.set_force_sum_reduction_for_comms(True)

    fsdp.disable_fsdp_gradient_division = disable_and_sum


_after_import("torchtitan.distributed.fsdp", _gloo_sum_reduction)
