"""The one recorder of kernelop's DSL front ends (ko.custom_plugin, ko.record_plugin).

A DSL front end (kernelop._triton, kernelop._cutedsl; one row each in kernelop._dsls) says how to intercept its
launch, map its arguments to its compiler's calling convention and compile one config for one architecture (Dsl).
This package does everything else: runs launch_fn once on fake tensors with symbolic sizes (tracing), polices
host-side work, names and shapes the outputs, turns conditions on the sizes into requirements, checks configs and
architectures (configs), names and validates the op (plugin) and compiles every tactic through kernelop's compile
cache into KernelBinary values (compiling).
"""

from .compiling import CompiledKernel, CompileJob, KernelBinary, arch_number, tactic_text
from .configs import (check_archs, check_config_keys, check_configs, check_output_names, conjunction, count,
                      select_over_configs, spec_archs, user_requires)
from .interception import Handlers, NestedRecording, caller_location
from .plugin import Dsl, RecordedPlugin, Recording, custom_plugin, package_main, record_plugin
from .tracing import Input, float_scalar_name, from_inputs, int_scalar_name, traced_error

__all__ = ["CompileJob", "CompiledKernel", "Dsl", "Handlers", "Input", "KernelBinary", "NestedRecording",
           "RecordedPlugin", "Recording", "arch_number", "caller_location", "check_archs", "check_config_keys",
           "check_configs", "check_output_names", "conjunction", "count", "custom_plugin", "float_scalar_name",
           "from_inputs", "int_scalar_name", "package_main", "record_plugin", "select_over_configs", "spec_archs",
           "tactic_text", "traced_error", "user_requires"]
