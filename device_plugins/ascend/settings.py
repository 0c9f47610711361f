"""The Ascend flavour's own settings: environment variables prefixed ``VGPU_DP_ASCEND_``.

They are read only when ``VGPU_DP_DISCOVERY`` is ``npu-smi`` or ``ascend-static``:

- ``VGPU_DP_ASCEND_NPU_SMI`` (``npu-smi``, looked up on ``PATH``): the npu-smi binary.
- ``VGPU_DP_ASCEND_CONFIG_FILE`` (none): HAMi's chip table, a ``device-config.yaml``
  with ``vnpus`` (or the section alone); the v2.10 chart's chips when unset.
- ``VGPU_DP_ASCEND_HAMI_VNPU_CORE`` (the table's ``hamiVnpuCore``): this node runs
  HAMi-core (soft split): ``hami-vnpu-core: "true"`` and 100 cores per chip.
- ``VGPU_DP_ASCEND_VDEVICE_COUNT`` (``0``): vNPUs per chip, HAMi's per-node
  ``vDeviceCount``; 0 is the chip's slots.
- ``VGPU_DP_ASCEND_CORE_DIR`` (``/usr/local/hami-vnpu-core``): HAMi-core for NPUs on the
  host, mounted at ``/hami-vnpu-core``.
- ``VGPU_DP_ASCEND_SHARED_REGION`` (``/usr/local/hami-shared-region``): the host folder
  HAMi-core's containers share.

A HAMi-core container's own folder is ``<VGPU_DP_HOOK_PATH>/containers/<pod uid>_<name>``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "VGPU_DP_ASCEND_"


class AscendSettingsError(ValueError):
    """A bad ``VGPU_DP_ASCEND_*`` value; the message is one line naming it."""


class AscendSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore")

    npu_smi: str = Field(default="npu-smi", min_length=1)
    config_file: Path | None = None
    hami_vnpu_core: bool | None = None
    vdevice_count: int = Field(default=0, ge=0, le=1000)
    core_dir: Path = Path("/usr/local/hami-vnpu-core")
    shared_region: Path = Path("/usr/local/hami-shared-region")


def load_settings(**values: object) -> AscendSettings:
    """The environment, with ``values`` on top; ``AscendSettingsError`` on a bad one."""
    try:
        return AscendSettings(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        parts = [
            f"{ENV_PREFIX}{'.'.join(str(p) for p in err['loc']).upper()} = "
            f"{err.get('input')!r}: {err['msg']}"
            for err in exc.errors()
        ]
        raise AscendSettingsError("invalid Ascend settings: " + "; ".join(parts)) from None
