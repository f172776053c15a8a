#pragma once
// kernelop shim: host-only in vLLM (streams, device guards); nothing for device code.
