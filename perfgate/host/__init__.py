"""The host: its processes (process groups, ports, teardown) and its GPUs (NVML: names, memory, UUIDs).

The ground floor beside the record's vocabulary: nothing here imports the rest of perfgate, so the flag checker,
the server lifecycle, the stack probes and the all-reduce harness all stand on it.
"""
