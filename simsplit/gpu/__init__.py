"""GPU operations, apart from any physics: the device inventory and CUDA helpers transports
share (:mod:`.devices`), CUDA error reports (:mod:`.cuda_errors`), device-event timing
(:mod:`.timing`), launch autotuning (:mod:`.autotune`) and NVML monitoring (:mod:`.monitor`).
CuPy and NVML are imported lazily, so CPU runs never load them."""
