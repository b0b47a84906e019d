"""In-process entry points the local transport calls instead of spawning a probe's command."""

from __future__ import annotations

import json

from nodecheck.transport import RunArgvInstead


def nvml() -> str:
    """The NVML probe's JSON, from this process (prolog mode: no python3 start-up, no stdin)."""
    from nodecheck.probes import nvml_probe

    try:
        return json.dumps(nvml_probe.collect())
    except nvml_probe.NvmlUnavailable as e:
        # the probe's command then runs for real: it falls back to nvidia-smi and says why
        raise RunArgvInstead(str(e)) from None
